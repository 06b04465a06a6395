package client

import (
	"context"
	"log/slog"
	"sync"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// The unary RPCs, each bounded by its timeout. They return errors or
// events; the callers own the goroutines they run on.

// fence carries out SendFence: FenceResponse.lac → FenceOK, error or
// timeout → FenceFailed.
func (c *Client) fence(ctx context.Context, id catalog.LedgerID, bookie string, key []byte) ledger.Event {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.FenceTimeout)
	defer cancel()
	bc, err := c.bookies.client(ctx, bookie)
	if err == nil {
		var resp *connect.Response[bookiev1.FenceResponse]
		resp, err = bc.Fence(ctx, connect.NewRequest(&bookiev1.FenceRequest{LedgerId: int64(id), MasterKey: key}))
		if err == nil {
			return ledger.FenceOK{Bookie: bookie, LAC: resp.Msg.GetLac()}
		}
	}
	if context.Cause(ctx) == context.Canceled && c.ctx.Err() == nil {
		// The caller stopped waiting (a recovery that heard enough
		// fences cancels the rest): not the bookie's failure.
		c.log.Debug("fence abandoned", slog.Int64("ledger", int64(id)), slog.String("bookie", bookie))
	} else {
		c.log.Warn("fence failed", slog.Int64("ledger", int64(id)), slog.String("bookie", bookie), slog.Any("err", err))
		c.meters.bookieError(bookie, opFence, reasonError, 1)
	}
	return ledger.FenceFailed{Bookie: bookie}
}

// announceClose fences a ledger its writer has just closed on the bookies
// of its last ensemble segment: their LAC long-polls then answer at once
// with "fenced", so tail readers learn of the close (a roll-over, a
// hand-over) without polling the catalog. Best effort and bounded by
// FenceTimeout: a bookie that misses it only makes its readers learn of
// the close from the catalog, later.
func (c *Client) announceClose(ctx context.Context, m catalog.LedgerMetadata) {
	if ctx.Err() != nil || len(m.Ensembles) == 0 {
		return
	}
	key := MasterKey(m)
	var wg sync.WaitGroup
	for _, b := range m.Ensembles[len(m.Ensembles)-1].Bookies {
		wg.Go(func() {
			fctx, cancel := context.WithTimeout(ctx, c.cfg.FenceTimeout)
			defer cancel()
			bc, err := c.bookies.client(fctx, b)
			if err == nil {
				_, err = bc.Fence(fctx, connect.NewRequest(&bookiev1.FenceRequest{LedgerId: int64(m.ID), MasterKey: key}))
			}
			if err != nil {
				c.log.Debug("announcing a closed ledger failed", slog.Int64("ledger", int64(m.ID)), slog.String("bookie", b), slog.Any("err", err))
			}
		})
	}
	wg.Wait()
}

// readEntry carries out SendRecoveryRead (fence true, with the master
// key) or one SendRead: one entry, verified (see readEvent).
func (c *Client) readEntry(ctx context.Context, id catalog.LedgerID, bookie string, entry int64, fence bool, key []byte) readAnswer {
	req := &bookiev1.ReadEntriesRequest{LedgerId: int64(id), FirstEntry: entry, LastEntry: entry}
	if fence {
		req.FenceAndRead, req.MasterKey = true, key
	}
	msg, err := c.readCall(ctx, bookie, req)
	a := readEvent(int64(id), bookie, entry, msg, err)
	c.noteCheck(id, entry, bookie, a)
	return a
}

// readEntries carries out the SendReads of a run of consecutive entries
// first..last to one bookie with range reads (ReadEntries{first, last}),
// one answer per entry, in order, each mapped as readEvent maps a single
// one. A bookie answers a prefix of the range (it stops at its byte limit
// or at an entry it lacks): the rest is asked again from where it
// stopped. When that fails (NOT_FOUND: the bookie lacks the entry; or
// another error), the entry is answered as readEvent maps it and the rest
// of the run ReadFailed, so the machine asks other replicas for them: a
// bookie that missed the last entries of a ledger costs one more call,
// not one per entry.
func (c *Client) readEntries(ctx context.Context, id catalog.LedgerID, bookie string, first, last int64) []readAnswer {
	out := make([]readAnswer, 0, last-first+1)
	for next := first; next <= last; {
		msg, err := c.readCall(ctx, bookie, &bookiev1.ReadEntriesRequest{LedgerId: int64(id), FirstEntry: next, LastEntry: last})
		if err != nil || len(msg.GetEntries()) == 0 {
			a := readEvent(int64(id), bookie, next, msg, err)
			c.noteCheck(id, next, bookie, a)
			out = append(out, a)
			for next++; next <= last; next++ {
				out = append(out, readAnswer{ev: ledger.ReadFailed{Bookie: bookie, Entry: next}, lac: -1})
			}
			break
		}
		for _, e := range msg.GetEntries() {
			if next > last {
				break
			}
			// Each entry carries its own checksum: one that fails is read
			// from another replica, the others of the answer stand.
			a := entryAnswer(int64(id), bookie, next, e, msg.GetLac())
			c.noteCheck(id, next, bookie, a)
			out = append(out, a)
			next++
		}
	}
	return out
}

// readCall is one ReadEntries call, bounded by ReadTimeout; a bookie that
// is not at its address any more is forgotten.
func (c *Client) readCall(ctx context.Context, bookie string, req *bookiev1.ReadEntriesRequest) (*bookiev1.ReadEntriesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	c.stats.readsSent.Add(1)
	bc, err := c.bookies.client(ctx, bookie)
	if err != nil {
		return nil, err
	}
	resp, err := bc.ReadEntries(ctx, connect.NewRequest(req))
	if err != nil {
		if unavailable(err) {
			c.bookies.forgetAfterFailure(bookie)
		}
		return nil, err
	}
	return resp.Msg, nil
}

// noteCheck counts and logs an entry that failed verification.
func (c *Client) noteCheck(id catalog.LedgerID, entry int64, bookie string, a readAnswer) {
	if a.checkErr == nil {
		return
	}
	c.stats.checksumFailures.Add(1)
	c.log.Error("entry failed verification; reading another replica", slog.Int64("ledger", int64(id)),
		slog.Int64("entry", entry), slog.String("bookie", bookie), slog.Any("err", a.checkErr))
}

// readLac asks bookie for the ledger's LAC once, without waiting for it
// to rise above previous. Long-polls go on the watch stream (watchLac);
// this is the one-off question.
func (c *Client) readLac(ctx context.Context, id catalog.LedgerID, bookie string, previous int64, maxEntryBytes int) (lac int64, fenced bool, ents []Entry, err error) {
	bc, err := c.bookies.client(ctx, bookie)
	if err != nil {
		return -1, false, nil, err
	}
	resp, err := bc.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{
		LedgerId: int64(id), PreviousLac: previous, MaxEntryBytes: int32(maxEntryBytes),
	}))
	if err != nil {
		if unavailable(err) {
			c.bookies.forgetAfterFailure(bookie)
		}
		return -1, false, nil, err
	}
	lac = resp.Msg.GetLac()
	return lac, resp.Msg.GetFenced(), c.lacEntries(id, bookie, previous, lac, resp.Msg.GetEntries()), nil
}

// lacEntries checks the entries a LAC answer carried: it returns those
// verified, in order from previous+1, not beyond the LAC it answered; the
// first that is not ends the list (the reader reads the rest the usual
// way).
func (c *Client) lacEntries(id catalog.LedgerID, bookie string, previous, lac int64, got []*bookiev1.Entry) []Entry {
	var ents []Entry
	for _, e := range got {
		next := previous + 1 + int64(len(ents))
		if next > lac {
			break
		}
		a := entryAnswer(int64(id), bookie, next, e, lac)
		c.noteCheck(id, next, bookie, a)
		ok, isOK := a.ev.(ledger.ReadOK)
		if !isOK {
			break
		}
		ents = append(ents, Entry{ID: next, Payload: ok.Payload})
	}
	return ents
}
