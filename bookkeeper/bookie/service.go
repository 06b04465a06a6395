package bookie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/bookkeeper/storage"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// Handler returns the path and handler of sluice.bookie.v1.BookieService.
// Mount it on an HTTP/2-capable server (AddEntries is a bidi stream). The
// handler reads no request message above Config.MaxAddMessageBytes (an
// option after opts, so it wins over a server-wide read limit).
func (b *Bookie) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append(slices.Clone(opts), connect.WithReadMaxBytes(b.cfg.MaxAddMessageBytes))
	return bookiev1connect.NewBookieServiceHandler(service{b}, opts...)
}

// service is the RPC edge: it validates requests, calls the Bookie, and maps
// errors to connect codes (the only place that does).
type service struct{ b *Bookie }

var _ bookiev1connect.BookieServiceHandler = service{}

// Default read size when a request leaves max_bytes zero.
const defaultReadBytes = 4 << 20

// maxResultsPerResponse bounds the results one AddEntriesResponse carries
// (about 14 bytes each), so a response stays far below any client's read
// limit whatever MaxInFlightAdds is.
const maxResultsPerResponse = 1024

// addResult is one add's answer on its way to the sender.
type addResult struct {
	ledger, entry int64
	status        bookiev1.AddStatus
}

// AddEntries runs one pipelined add stream. Up to MaxInFlightAdds adds
// (entries, not messages) are outstanding; beyond it the handler stops
// reading the stream, which pushes back on the client through HTTP/2 flow
// control. A message may carry at most MaxInFlightAdds adds (more could
// never be outstanding at once: the stream fails with INVALID_ARGUMENT),
// and at least one. The adds of a message are handled one by one, each
// answered with its own status: a bad add fails alone. Answers go out in
// the order they are ready — journal-completion (sequence) order for
// acknowledgements, so in order within a ledger; refusals at once.
//
// Goroutines: the handler's own (reads requests, calls Add) and one sender it
// starts and waits for. Completions (journal goroutine) and up-front
// refusals (handler goroutine) put answers on out, whose capacity equals the
// in-flight bound, so putting never blocks; the sender takes every answer
// ready at that moment (never waiting for more), sends them as one
// response (grouped by ledger), and frees a slot per answer sent. When
// the client half-closes, the handler waits until every answer is sent,
// then returns.
func (s service) AddEntries(ctx context.Context, stream *connect.BidiStream[bookiev1.AddEntriesRequest, bookiev1.AddEntriesResponse]) error {
	b := s.b
	slots := make(chan struct{}, b.cfg.MaxInFlightAdds)
	out := make(chan addResult, b.cfg.MaxInFlightAdds)
	stop := make(chan struct{})
	senderDone := make(chan error, 1)
	go func() {
		var sendErr error
		send := stream.Send
		ready := make([]addResult, 0, min(b.cfg.MaxInFlightAdds, maxResultsPerResponse))
		for {
			select {
			case r := <-out:
				ready = append(ready[:0], r)
			drain:
				for len(ready) < cap(ready) {
					select {
					case r := <-out:
						ready = append(ready, r)
					default:
						break drain
					}
				}
				b.meters.answered(ready)
				if sendErr == nil {
					sendErr = sendResults(send, ready)
				}
				for range ready {
					<-slots
				}
			case <-stop:
				senderDone <- sendErr
				return
			}
		}
	}()
	finish := func(err error) error {
		close(stop)
		if serr := <-senderDone; err == nil && serr != nil {
			err = serr
		}
		return err
	}
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return finish(err)
		}
		if err := validateAddEntries(req, b.cfg.MaxInFlightAdds); err != nil {
			return finish(code(err))
		}
		for _, g := range req.GetLedgers() {
			if err := s.addGroup(ctx, g, slots, out); err != nil {
				return finish(err)
			}
		}
	}
	// Half-closed: wait for every outstanding answer to be sent.
	for range cap(slots) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return finish(ctx.Err())
		}
	}
	return finish(nil)
}

// validateAddEntries checks what ends the stream: a message with no
// groups, a group with neither adds nor a LAC, more adds than the stream
// may have unacknowledged.
func validateAddEntries(req *bookiev1.AddEntriesRequest, maxInFlight int) error {
	groups := req.GetLedgers()
	if len(groups) == 0 {
		return fmt.Errorf("%w: AddEntries message carries no ledgers (a client of an older protocol version?)", ErrInvalid)
	}
	n := 0
	for i, g := range groups {
		if len(g.GetAdds()) == 0 && g.Lac == nil {
			return fmt.Errorf("%w: AddEntries message: ledgers[%d] (ledger %d) carries neither adds nor a lac", ErrInvalid, i, g.GetLedgerId())
		}
		n += len(g.GetAdds())
	}
	if n > maxInFlight {
		return fmt.Errorf("%w: AddEntries message carries %d adds; limit %d (the stream's in-flight bound)", ErrInvalid, n, maxInFlight)
	}
	return nil
}

// addGroup hands one ledger's adds to the bookie, each taking an in-flight
// slot (released once its answer is sent), then applies the group's LAC.
// A bad group or add is answered ADD_STATUS_ERROR (a bad LAC is logged):
// only the end of ctx ends the stream.
func (s service) addGroup(ctx context.Context, g *bookiev1.LedgerAdds, slots chan struct{}, out chan<- addResult) error {
	b := s.b
	ledger := g.GetLedgerId()
	groupErr := validateAddGroup(g)
	if groupErr != nil {
		b.log.Warn("adds refused", slog.Int64("ledger", ledger), slog.Int("adds", len(g.GetAdds())), slog.Any("err", groupErr))
	}
	for _, a := range g.GetAdds() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		entry := a.GetEntryId()
		span := b.meters.startCommitSpan(ctx, b.cfg.ID, ledger, a) // nil unless traced
		answer := func(st bookiev1.AddStatus) {
			endCommitSpan(span, st)
			out <- addResult{ledger: ledger, entry: entry, status: st}
		}
		if groupErr != nil {
			answer(bookiev1.AddStatus_ADD_STATUS_ERROR)
			continue
		}
		if err := validateAdd(a, b.cfg.MaxEntryBytes); err != nil {
			b.log.Warn("add refused", slog.Int64("ledger", ledger), slog.Int64("entry", entry), slog.Any("err", err))
			answer(bookiev1.AddStatus_ADD_STATUS_ERROR)
			continue
		}
		err := b.Add(ctx, AddRequest{
			Ledger: ledger, Entry: entry, LAC: a.GetLac(), Payload: a.GetPayload(),
			Checksum: a.GetCrc32C(), MasterKey: g.GetMasterKey(), Recovery: a.GetRecovery(),
		}, func(err error) {
			if err != nil {
				answer(bookiev1.AddStatus_ADD_STATUS_ERROR)
				return
			}
			answer(bookiev1.AddStatus_ADD_STATUS_OK)
		})
		if err != nil {
			answer(addStatus(err))
		}
	}
	if g.Lac != nil && groupErr == nil {
		// As WriteLac, unanswered: a failure only delays tail readers
		// until the next add carries the LAC.
		if err := b.WriteLAC(ledger, g.GetMasterKey(), g.GetLac()); err != nil {
			b.log.Debug("lac refused", slog.Int64("ledger", ledger), slog.Int64("lac", g.GetLac()), slog.Any("err", err))
		}
	}
	return nil
}

// sendResults sends ready answers in order, in one response, grouped by
// runs of one ledger.
func sendResults(send func(*bookiev1.AddEntriesResponse) error, ready []addResult) error {
	if len(ready) == 0 {
		return nil
	}
	resp := &bookiev1.AddEntriesResponse{}
	var g *bookiev1.LedgerResults
	for _, r := range ready {
		if g == nil || g.LedgerId != r.ledger {
			g = &bookiev1.LedgerResults{LedgerId: r.ledger}
			resp.Ledgers = append(resp.Ledgers, g)
		}
		g.Results = append(g.Results, &bookiev1.AddResult{EntryId: r.entry, Status: r.status})
	}
	return send(resp)
}

// validateAddGroup checks the fields every add of a group shares.
func validateAddGroup(g *bookiev1.LedgerAdds) error {
	switch {
	case g.GetLedgerId() < 0:
		return fmt.Errorf("%w: ledger_id %d is negative", ErrInvalid, g.GetLedgerId())
	case len(g.GetMasterKey()) == 0 || len(g.GetMasterKey()) > storage.MaxMasterKeySize:
		return fmt.Errorf("%w: master_key of %d bytes, want 1..%d", ErrInvalid, len(g.GetMasterKey()), storage.MaxMasterKeySize)
	case g.Lac != nil && g.GetLac() < -1:
		return fmt.Errorf("%w: lac %d is below -1", ErrInvalid, g.GetLac())
	}
	return nil
}

// validateAdd checks one add's own fields.
func validateAdd(a *bookiev1.Add, maxEntry int) error {
	switch {
	case a.GetEntryId() < 0:
		return fmt.Errorf("%w: entry_id %d is negative", ErrInvalid, a.GetEntryId())
	case a.GetLac() < -1:
		return fmt.Errorf("%w: lac %d is below -1", ErrInvalid, a.GetLac())
	case len(a.GetPayload()) > maxEntry:
		return fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrInvalid, len(a.GetPayload()), maxEntry)
	}
	return nil
}

// addStatus maps an add refused up front to its protocol status.
func addStatus(err error) bookiev1.AddStatus {
	switch {
	case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrLedgerDeleted):
		// A deleted ledger was closed long ago: for its writer that is
		// the same as fenced (stop for good).
		return bookiev1.AddStatus_ADD_STATUS_FENCED
	case errors.Is(err, storage.ErrUnauthorized):
		return bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED
	case errors.Is(err, storage.ErrBadChecksum):
		return bookiev1.AddStatus_ADD_STATUS_BAD_CHECKSUM
	case errors.Is(err, ErrReadOnly), errors.Is(err, storage.ErrBufferFull), errors.Is(err, journal.ErrQueueFull):
		return bookiev1.AddStatus_ADD_STATUS_REJECTED
	default:
		return bookiev1.AddStatus_ADD_STATUS_ERROR
	}
}

// code maps the bookie's, storage's and journal's errors to connect codes.
func code(err error) error {
	c := connect.CodeInternal
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, storage.ErrInvalidArgument):
		c = connect.CodeInvalidArgument
	case errors.Is(err, storage.ErrNoSuchLedger), errors.Is(err, storage.ErrNoSuchEntry), errors.Is(err, storage.ErrLedgerDeleted):
		c = connect.CodeNotFound
	case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrUnauthorized):
		c = connect.CodeFailedPrecondition
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrDataLoss):
		c = connect.CodeDataLoss
	case errors.Is(err, ErrReadOnly), errors.Is(err, ErrBusy), errors.Is(err, storage.ErrBufferFull), errors.Is(err, journal.ErrQueueFull):
		c = connect.CodeResourceExhausted
	case errors.Is(err, ErrUnavailable), errors.Is(err, storage.ErrClosed), errors.Is(err, storage.ErrFailed),
		errors.Is(err, journal.ErrClosed), errors.Is(err, journal.ErrFailed):
		c = connect.CodeUnavailable
	case errors.Is(err, context.Canceled):
		c = connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		c = connect.CodeDeadlineExceeded
	}
	return connect.NewError(c, err)
}

func (s service) ReadEntries(_ context.Context, req *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	m := req.Msg
	maxBytes := int(m.GetMaxBytes())
	switch {
	case maxBytes < 0 || maxBytes > s.b.cfg.MaxReadBytes:
		return nil, code(fmt.Errorf("%w: max_bytes %d outside [0, %d]", ErrInvalid, maxBytes, s.b.cfg.MaxReadBytes))
	case maxBytes == 0:
		maxBytes = min(defaultReadBytes, s.b.cfg.MaxReadBytes)
	}
	if m.GetFenceAndRead() && len(m.GetMasterKey()) == 0 {
		return nil, code(fmt.Errorf("%w: master_key is required with fence_and_read", ErrInvalid))
	}
	start := time.Now()
	ents, info, err := s.b.Read(m.GetLedgerId(), m.GetFirstEntry(), m.GetLastEntry(), maxBytes, m.GetFenceAndRead(), m.GetMasterKey())
	s.b.meters.readDone(start, err)
	if err != nil {
		return nil, code(err)
	}
	s.b.meters.read(rpcReadEntries, ents)
	return connect.NewResponse(&bookiev1.ReadEntriesResponse{Lac: info.LAC, Fenced: info.Fenced, Entries: wireEntries(ents)}), nil
}

func (s service) ReadLac(ctx context.Context, req *connect.Request[bookiev1.ReadLacRequest]) (*connect.Response[bookiev1.ReadLacResponse], error) {
	m := req.Msg
	wait := time.Duration(m.GetTimeoutMs()) * time.Millisecond
	if wait < 0 || wait > s.b.cfg.MaxLacWait {
		return nil, code(fmt.Errorf("%w: timeout_ms %d outside [0, %d]", ErrInvalid, m.GetTimeoutMs(), s.b.cfg.MaxLacWait.Milliseconds()))
	}
	maxBytes := int(m.GetMaxEntryBytes())
	if maxBytes < 0 {
		return nil, code(fmt.Errorf("%w: max_entry_bytes %d is negative", ErrInvalid, maxBytes))
	}
	lac, fenced, err := s.b.ReadLAC(ctx, m.GetLedgerId(), m.GetPreviousLac(), wait)
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.ReadLacResponse{
		Lac: lac, Fenced: fenced, Entries: s.advanceEntries(rpcReadLac, m.GetLedgerId(), m.GetPreviousLac(), lac, maxBytes),
	}), nil
}

// advanceEntries reads the entries a LAC advance from prev to lac made
// readable, within maxBytes (0: none), for a ReadLac or WatchLac answer.
// Best effort: an entry this bookie lacks (or any read error) only means
// the reader reads it the usual way. rpc names the caller for the read
// counters.
func (s service) advanceEntries(rpc int, ledger, prev, lac int64, maxBytes int) []*bookiev1.Entry {
	if maxBytes <= 0 || lac <= prev {
		return nil
	}
	ents, _, err := s.b.Read(ledger, prev+1, lac, min(maxBytes, s.b.cfg.MaxReadBytes), false, nil)
	if err != nil {
		return nil
	}
	s.b.meters.read(rpc, ents)
	return wireEntries(ents)
}

// wireEntries converts entries read to their RPC form.
func wireEntries(ents []storage.Entry) []*bookiev1.Entry {
	out := make([]*bookiev1.Entry, len(ents))
	for i, e := range ents {
		out[i] = &bookiev1.Entry{EntryId: e.Entry, Lac: e.LAC, Payload: e.Payload, Crc32C: e.Checksum}
	}
	return out
}

func (s service) WriteLac(_ context.Context, req *connect.Request[bookiev1.WriteLacRequest]) (*connect.Response[bookiev1.WriteLacResponse], error) {
	m := req.Msg
	if err := s.b.WriteLAC(m.GetLedgerId(), m.GetMasterKey(), m.GetLac()); err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.WriteLacResponse{}), nil
}

func (s service) Fence(_ context.Context, req *connect.Request[bookiev1.FenceRequest]) (*connect.Response[bookiev1.FenceResponse], error) {
	m := req.Msg
	info, err := s.b.Fence(m.GetLedgerId(), m.GetMasterKey())
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.FenceResponse{Lac: info.LAC, LastEntry: info.LastEntry}), nil
}

func (s service) DeleteLedger(_ context.Context, req *connect.Request[bookiev1.DeleteLedgerRequest]) (*connect.Response[bookiev1.DeleteLedgerResponse], error) {
	if err := s.b.DeleteLedger(req.Msg.GetLedgerId()); err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.DeleteLedgerResponse{}), nil
}

func (s service) MissingLedgers(_ context.Context, req *connect.Request[bookiev1.MissingLedgersRequest]) (*connect.Response[bookiev1.MissingLedgersResponse], error) {
	missing, err := s.b.MissingLedgers(req.Msg.GetLedgerIds())
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.MissingLedgersResponse{Missing: missing}), nil
}

func (s service) GetStatus(context.Context, *connect.Request[bookiev1.GetStatusRequest]) (*connect.Response[bookiev1.GetStatusResponse], error) {
	return connect.NewResponse(statusMessage(s.b.Status())), nil
}

func (s service) SetDraining(_ context.Context, req *connect.Request[bookiev1.SetDrainingRequest]) (*connect.Response[bookiev1.SetDrainingResponse], error) {
	if err := s.b.SetDraining(req.Msg.GetDraining()); err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&bookiev1.SetDrainingResponse{Status: statusMessage(s.b.Status())}), nil
}

func statusMessage(st Status) *bookiev1.GetStatusResponse {
	m := &bookiev1.GetStatusResponse{
		BookieId: st.Cookie.BookieID, InstanceId: st.Cookie.InstanceID,
		FreeBytes: st.FreeBytes, TotalBytes: st.TotalBytes, ReadOnly: st.ReadOnly, Draining: st.Draining,
	}
	if st.Draining {
		m.DrainingSinceMs = st.DrainingSince.UnixMilli()
	}
	return m
}
