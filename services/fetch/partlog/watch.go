package partlog

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
)

// watch is a partition's tail watcher (see the package doc). It runs until
// the partition has had no reader for TailIdle or the Logs close; Wait
// starts it.
func (lg *Log) watch() {
	ls := lg.ls
	defer ls.wg.Done()
	ctx := ls.ctx
	chainAge := ls.cfg.TailCheck
	backoff := 10 * time.Millisecond
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		lg.mu.Lock()
		if ctx.Err() != nil || (len(lg.followers) == 0 && ls.cfg.Now().Sub(lg.touched) > ls.cfg.TailIdle) {
			lg.watching = false
			lg.mu.Unlock()
			return
		}
		lg.mu.Unlock()
		err := lg.watchRound(ctx, chainAge)
		switch {
		case err == nil:
			chainAge, backoff = ls.cfg.TailCheck, 10*time.Millisecond
		case errors.Is(err, errQuiet):
			chainAge = 0 // nothing moved: look for a roll-over next round
		case errors.Is(err, errNoTail):
			chainAge = 0
			if !pause(lg.quiet()) {
				continue
			}
		default:
			if ctx.Err() != nil {
				continue
			}
			ls.log.Warn("tail watcher failed; retrying", slog.String("topic", lg.key.topic), slog.Int("partition", lg.key.partition),
				slog.Any("err", err), slog.Duration("backoff", backoff))
			chainAge = 0
			pause(backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

var (
	errQuiet  = errors.New("no new entries")
	errNoTail = errors.New("no open tail ledger")
)

// watchRound long-polls the tail ledger's LAC for up to TailCheck; when it
// moves, reads the new entries into the cache and raises the high
// watermark.
func (lg *Log) watchRound(ctx context.Context, chainAge time.Duration) error {
	ls := lg.ls
	p, err := lg.chain(ctx, chainAge)
	if err != nil {
		return err
	}
	if len(p.Ledgers) == 0 {
		lg.raise(p.LogStartOffset)
		return errNoTail
	}
	// Ledgers before the tail are sealed; learn it so their readers end,
	// and raise the high watermark to their end: a roll-over seals the
	// last entries of a ledger without a LAC push, so only the sealed
	// metadata tells that they are readable.
	for _, ref := range p.Ledgers[max(0, len(p.Ledgers)-3) : len(p.Ledgers)-1] {
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return err
		}
		m := st.metadata()
		if !m.State.Sealed() {
			if m, err = st.refresh(ctx); err != nil {
				return err
			}
		}
		if m.State.Sealed() {
			lg.raise(m.LastOffset + 1)
		}
	}
	st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
	if err != nil {
		return err
	}
	prev, sealed := st.readable()
	if sealed {
		end, err := ls.tailEnd(ctx, st)
		if err != nil {
			return err
		}
		lg.raise(end)
		return errNoTail // sealed, the next ledger not in the chain yet
	}
	wr, err := st.watcher(ctx, ls.lc)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, lg.quiet())
	lac, werr := wr.WaitLAC(wctx, prev)
	cancel()
	switch {
	case lac > prev:
		st.rd.LearnLAC(lac)
		// Read ahead what the waiting readers will ask for.
		ents, err := ls.entries(ctx, st, max(prev+1, lac-31), lac, 4<<20)
		if err != nil {
			return err
		}
		for _, en := range ents {
			if _, err := ls.learn(st, en); err != nil {
				return err
			}
		}
		end, err := ls.tailEnd(ctx, st)
		if err != nil {
			return err
		}
		lg.raise(end)
		return nil
	case errors.Is(werr, client.ErrLedgerSealed):
		if _, err := st.refresh(ctx); err != nil {
			return err
		}
		end, err := ls.tailEnd(ctx, st)
		if err != nil {
			return err
		}
		lg.raise(end)
		return errQuiet
	case werr != nil && ctx.Err() == nil && errors.Is(werr, context.DeadlineExceeded):
		return errQuiet
	default:
		return werr
	}
}

// watcher returns the ledger's long-poll reader, opening it.
func (st *ledgerState) watcher(ctx context.Context, lc *client.Client) (*client.Reader, error) {
	st.mu.Lock()
	wr := st.wr
	st.mu.Unlock()
	if wr != nil {
		return wr, nil
	}
	wr, err := lc.OpenReader(ctx, st.id)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wr == nil {
		st.wr = wr
	}
	return st.wr, nil
}

// quiet is how long the tail may stay still before the watcher looks for a
// roll-over: BusyTailCheck if it moved within the last second, else
// TailCheck.
func (lg *Log) quiet() time.Duration {
	ls := lg.ls
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if ls.cfg.Now().Sub(lg.moved) < time.Second {
		return ls.cfg.BusyTailCheck
	}
	return ls.cfg.TailCheck
}
