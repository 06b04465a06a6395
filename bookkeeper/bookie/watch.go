package bookie

import (
	"context"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// maxWatchesPerMessage bounds the watches (and cancels) one
// WatchLacRequest carries.
const maxWatchesPerMessage = 4096

// maxAdvancesPerMessage bounds the answers one WatchLacResponse carries
// (with their ids and LACs, ~30 bytes each), and the payload bytes of its
// entries stay within the largest max_entry_bytes of the watches it
// answers (one advance may carry one larger entry, as ReadLac does): a
// message is never larger than an answer the client could get from one
// ReadLac.
const maxAdvancesPerMessage = 1024

// WatchLac runs one LAC watch stream: many long-polls on one stream, so a
// client that follows many ledgers makes no call per ledger and round.
//
// Goroutines: the handler's own reads requests, registers and cancels
// watches; one sender it starts and waits for answers the watches that
// fired. Watches fire from the add, WriteLac and fence paths
// (lacWatch.update / fence) or at registration, and only queue themselves
// on the stream (lacStream.push), so those paths never wait for the
// network. The sender reads the LAC and the entries the client asked for
// when it answers, so an answer is never older than the advance that fired
// it. Registered watches count against MaxLacWaiters with the ReadLac
// long-polls; when the stream ends (the client half-closes or goes away)
// every watch it still has is dropped.
func (s service) WatchLac(ctx context.Context, stream *connect.BidiStream[bookiev1.WatchLacRequest, bookiev1.WatchLacResponse]) error {
	b := s.b
	ls := newLacStream()
	sctx, stop := context.WithCancel(ctx)
	senderDone := make(chan error, 1)
	go func() { senderDone <- s.sendAdvances(sctx, stream, ls) }()
	finish := func(err error) error {
		stop()
		serr := <-senderDone
		ls.mu.Lock()
		regs := make([]*lacReg, 0, len(ls.regs))
		for _, r := range ls.regs {
			regs = append(regs, r)
		}
		clear(ls.regs)
		ls.mu.Unlock()
		for _, r := range regs {
			b.lacs.cancel(r)
		}
		if err == nil && serr != nil && !errors.Is(serr, context.Canceled) {
			err = serr
		}
		return err
	}
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(err)
		}
		if err := validateWatchLac(req); err != nil {
			return finish(code(err))
		}
		for i, w := range req.GetWatches() {
			if err := s.watch(ls, i, w); err != nil {
				return finish(code(err))
			}
		}
	}
}

// validateWatchLac checks what ends the stream: a message with no
// watches or more than maxWatchesPerMessage.
func validateWatchLac(req *bookiev1.WatchLacRequest) error {
	n := len(req.GetWatches())
	if n == 0 || n > maxWatchesPerMessage {
		return fmt.Errorf("%w: WatchLac message carries %d watches; want 1 to %d", ErrInvalid, n, maxWatchesPerMessage)
	}
	return nil
}

// maxStreamWatches bounds one stream's watches not yet answered: those
// registered (at most MaxLacWaiters) and a message's worth of refusals
// more.
func maxStreamWatches(cfg Config) int { return cfg.MaxLacWaiters + maxWatchesPerMessage }

// watch registers or cancels one watch of message index i. Only an id
// registered twice, or maxStreamWatches unanswered on the stream, ends
// it; a watch the bookie cannot take is answered with its
// reason.
func (s service) watch(ls *lacStream, i int, w *bookiev1.LacWatch) error {
	ls.mu.Lock()
	old := ls.regs[w.GetId()]
	if w.GetCancel() {
		delete(ls.regs, w.GetId())
		ls.mu.Unlock()
		if old != nil {
			s.b.lacs.cancel(old)
		}
		return nil
	}
	if old != nil {
		ls.mu.Unlock()
		return fmt.Errorf("%w: WatchLac message: watches[%d]: id %d is already registered on this stream", ErrInvalid, i, w.GetId())
	}
	if n := len(ls.regs); n >= maxStreamWatches(s.b.cfg) {
		// Registered watches are bounded by MaxLacWaiters; the rest are
		// refusals a client that does not read its answers lets pile up.
		ls.mu.Unlock()
		return fmt.Errorf("%w: WatchLac stream has %d watches unanswered; the client is not reading its answers", ErrBusy, n)
	}
	r := &lacReg{s: ls, id: w.GetId(), ledger: w.GetLedgerId(), prev: w.GetPreviousLac(), maxBytes: int(w.GetMaxEntryBytes())}
	ls.regs[r.id] = r
	ls.mu.Unlock()
	if err := s.b.watchLAC(r); err != nil {
		// Not registered, or dropped again: answer with the reason
		// unless it fired meanwhile and was answered.
		rr := &lacReg{s: ls, id: r.id, ledger: r.ledger, refused: err.Error()}
		ls.mu.Lock()
		ok := ls.regs[r.id] == r
		if ok {
			ls.regs[r.id] = rr
		}
		ls.mu.Unlock()
		if ok {
			ls.push(rr)
		}
	}
	return nil
}

// sendAdvances answers the watches that fired, all those ready at a time in
// as few messages as the read bound allows, until ctx ends or a send fails.
func (s service) sendAdvances(ctx context.Context, stream *connect.BidiStream[bookiev1.WatchLacRequest, bookiev1.WatchLacResponse], ls *lacStream) error {
	b := s.b
	for {
		select {
		case <-ls.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		resp := &bookiev1.WatchLacResponse{}
		size, limit := 0, 0
		for _, r := range ls.take() {
			a := s.advance(r)
			n := 0
			for _, e := range a.GetEntries() {
				n += len(e.GetPayload())
			}
			if len(resp.Advances) > 0 && (len(resp.Advances) == maxAdvancesPerMessage || size+n > min(max(limit, r.maxBytes), b.cfg.MaxReadBytes)) {
				if err := stream.Send(resp); err != nil {
					return err
				}
				resp, size, limit = &bookiev1.WatchLacResponse{}, 0, 0
			}
			resp.Advances = append(resp.Advances, a)
			size += n
			limit = max(limit, r.maxBytes)
		}
		if len(resp.Advances) > 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// advance builds the answer to watch r: the LAC now (at least the one
// that fired it) and, on request, the entries it made readable — best
// effort, as ReadLac's.
func (s service) advance(r *lacReg) *bookiev1.LacAdvance {
	a := &bookiev1.LacAdvance{Id: r.id, LedgerId: r.ledger}
	if r.refused != "" {
		a.Refused = r.refused
		return a
	}
	lac, fenced, err := s.b.lacInfo(r.ledger)
	if err != nil {
		a.Refused = err.Error()
		return a
	}
	// r.lac and r.fenced were set before r was pushed; take (under the
	// stream's lock) orders that write before this read.
	a.Lac, a.Fenced = max(lac, r.lac), fenced || r.fenced
	a.Entries = s.advanceEntries(rpcWatchLac, r.ledger, r.prev, a.Lac, r.maxBytes)
	return a
}
