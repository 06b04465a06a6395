package bookie

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Heartbeat registers the bookie in the catalog's bookie registry at
// address and renews the record every interval (with ttl, so a bookie that
// stops renewing drops out of ensemble selection after ttl), carrying its
// free space, read-only flag and draining state (a change of draining is
// sent at once). It returns when ctx ends, after removing nothing: a
// stopped bookie's record simply expires, which is what writers already
// handle. A failed renewal is resent within the interval
// (catalog.RetryHeartbeat), then logged; writers only see the bookie vanish
// if renewals keep failing for ttl.
func (b *Bookie) Heartbeat(ctx context.Context, reg catalog.Bookies, address string, interval, ttl time.Duration) error {
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	if ttl <= 0 {
		ttl = DefaultHeartbeatTTL
	}
	beat := func() {
		st := b.Status()
		rec := catalog.Bookie{
			ID: b.cfg.ID, Address: address,
			FreeBytes: max(st.FreeBytes, 0), TotalBytes: max(st.TotalBytes, st.FreeBytes, 0),
			ReadOnly: st.ReadOnly || st.Failed != nil, Draining: st.Draining,
		}
		cctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		err := catalog.RetryHeartbeat(cctx, func(ctx context.Context) error {
			_, err := reg.HeartbeatBookie(ctx, rec, ttl)
			return err
		})
		if err != nil && ctx.Err() == nil {
			b.log.Warn("bookie heartbeat failed", slog.Any("err", err))
		}
	}
	beat()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			beat()
		case <-b.beatKick:
			beat() // the mode changed (SetDraining): say so at once
		}
	}
}
