package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// BookieStatus is a bookie's mode as it reported it.
type BookieStatus struct {
	ReadOnly      bool
	Draining      bool
	DrainingSince time.Time // when Draining
}

// SetBookieDraining starts (true) or cancels (false) draining on bookie id
// (decommissioning; bookkeeper/DESIGN.md "Decommission"), found through
// the registry with its identity checked, and returns its status after the
// change, which the bookie made durable before answering. Errors:
// ErrUnknownBookie when the registry does not list it; the RPC's error
// (connect codes) otherwise.
func (c *Client) SetBookieDraining(ctx context.Context, id string, draining bool) (BookieStatus, error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return BookieStatus{}, err
	}
	defer leave()
	bc, err := c.bookies.client(ctx, id)
	if err != nil {
		return BookieStatus{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, c.cfg.FenceTimeout)
	defer cancel()
	resp, err := bc.SetDraining(sctx, connect.NewRequest(&bookiev1.SetDrainingRequest{Draining: draining}))
	if err != nil {
		return BookieStatus{}, fmt.Errorf("bookie %s: set draining %v: %w", id, draining, err)
	}
	st := resp.Msg.GetStatus()
	out := BookieStatus{ReadOnly: st.GetReadOnly(), Draining: st.GetDraining()}
	if out.Draining {
		out.DrainingSince = time.UnixMilli(st.GetDrainingSinceMs())
	}
	return out, nil
}
