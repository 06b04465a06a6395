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

// watch registers or cancels one watch of message index i. Only an id
// registered twice ends the stream; a watch the bookie cannot take is
// answered with its reason.
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
	s.b.lacs.mu.Lock()
	lac, fenced = max(lac, r.lac), fenced || r.fenced
	s.b.lacs.mu.Unlock()
	a.Lac, a.Fenced = lac, fenced
	if r.maxBytes > 0 && lac > r.prev {
		ents, _, err := s.b.Read(r.ledger, r.prev+1, lac, min(r.maxBytes, s.b.cfg.MaxReadBytes), false, nil)
		if err == nil {
			a.Entries = make([]*bookiev1.Entry, len(ents))
			for i, e := range ents {
				a.Entries[i] = &bookiev1.Entry{EntryId: e.Entry, Lac: e.LAC, Payload: e.Payload, Crc32C: e.Checksum}
			}
		}
	}
	return a
}
