package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/internal/apierr"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Forwarding: a copy that receives batches for a partition another copy
// owns sends them on, over one ProduceStream per owner (a fwdStream). The
// stream keeps the forwards of one partition in the order forward was
// called — the order of the requests of the client stream they serve — so
// an idempotent producer's batches reach the owner in sequence, and it is
// pipelined: the owner answers in order while later forwards are already
// on their way. (Forwards were unary calls, one at a time per partition so
// they could not overtake each other: one round trip each. After an outage
// the producers' backlog drained at about 40 batches a second per
// partition, slower than it had built up.)

// fwdStream is the forwarding stream to one owner. Its sender and receiver
// goroutines are owned by the Service (fwdWG) and end when the stream
// breaks or the Service shuts forwarding down.
type fwdStream struct {
	addr   string
	cancel context.CancelFunc
	// ended is closed when the stream ends (fail, closeForwarding): its
	// sender stops, and nothing takes from queue any more.
	ended <-chan struct{}
	queue chan fwdReq // to the sender, in call order

	// sendMu orders forward calls: the correlation id is taken and the
	// request queued under it. Never held by the receiver, so answers are
	// taken while a forward waits for queue space.
	sendMu sync.Mutex
	// mu guards pending, next and err.
	mu      sync.Mutex
	pending map[uint64]*forwardCall
	next    uint64
	err     error // once broken: the pending calls and later ones fail with it
}

type fwdReq struct {
	id  uint64
	req *sluicev1.ProduceRequest
}

// forward sends a partition's batches to the copy that owns it, on the
// forwarding stream to that copy, and returns at once; the call completes
// when the owner answered, the stream broke, or ctx ended while the
// request waited for queue space. A stream that breaks while the request
// waits for queue space ends the wait (its sender is gone), so neither
// this call nor the later ones on the stream, queued behind sendMu, wait
// for their callers' deadlines.
func (s *Service) forward(ctx context.Context, address, topic string, p int, batches [][]byte) *forwardCall {
	fc := &forwardCall{done: make(chan struct{})}
	req := &sluicev1.ProduceRequest{Topic: topic}
	for _, b := range batches {
		req.Batches = append(req.Batches, &sluicev1.EncodedBatch{Partition: int32(p), Data: b})
	}
	fs, err := s.fwdStreamTo(address)
	if err != nil {
		fc.finish(nil, err)
		return fc
	}
	fs.sendMu.Lock()
	defer fs.sendMu.Unlock()
	fs.mu.Lock()
	if fs.err != nil {
		err := fs.err
		fs.mu.Unlock()
		fc.finish(nil, err)
		return fc
	}
	id := fs.next
	fs.next++
	fs.pending[id] = fc
	fs.mu.Unlock()
	select {
	case fs.queue <- fwdReq{id, req}:
	case <-fs.ended:
		// fail settled the call, unless closeForwarding ended the stream
		// and has not failed it yet.
		if fs.take(id) != nil {
			fc.finish(nil, retry("forwarding to the owner at %s ended; retry", fs.addr))
		}
	case <-ctx.Done():
		if fs.take(id) != nil {
			fc.finish(nil, context.Cause(ctx))
		}
	}
	return fc
}

// newFwdStream returns a forwarding stream to addr that is not connected
// yet, and the context its sender and receiver run under.
func newFwdStream(parent context.Context, addr string, maxInFlight int) (*fwdStream, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	return &fwdStream{addr: addr, cancel: cancel, ended: ctx.Done(), queue: make(chan fwdReq, maxInFlight), pending: make(map[uint64]*forwardCall)}, ctx
}

func (fc *forwardCall) finish(resp *sluicev1.ProduceResponse, err error) {
	fc.resp, fc.err = resp, err
	close(fc.done)
}

// take removes and returns the pending call id (nil if already settled).
func (fs *fwdStream) take(id uint64) *forwardCall {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fc := fs.pending[id]
	delete(fs.pending, id)
	return fc
}

// fwdStreamTo returns the working forwarding stream to address, opening
// one if there is none (or the last one broke).
func (s *Service) fwdStreamTo(address string) (*fwdStream, error) {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwdClosed {
		return nil, retry("ingest copy shutting down; retry")
	}
	if fs := s.fwdStreams[address]; fs != nil {
		fs.mu.Lock()
		ok := fs.err == nil
		fs.mu.Unlock()
		if ok {
			return fs, nil
		}
	}
	fs, ctx := newFwdStream(s.fwdCtx, address, s.cfg.MaxStreamInFlight)
	stream := s.d.Forward(address).ProduceStream(ctx)
	stream.RequestHeader().Set(forwardedHeader, "1")
	s.fwdStreams[address] = fs
	s.fwdWG.Add(2)
	go func() {
		defer s.fwdWG.Done()
		for {
			select {
			case r := <-fs.queue:
				if err := stream.Send(&sluicev1.ProduceStreamRequest{CorrelationId: r.id, Request: r.req, AnyOrder: true}); err != nil {
					fs.fail(err) // the receiver usually has the better error first
					return
				}
			case <-ctx.Done():
				_ = stream.CloseRequest()
				return
			}
		}
	}()
	go func() {
		defer s.fwdWG.Done()
		for {
			resp, err := stream.Receive()
			if err != nil {
				fs.fail(err)
				_ = stream.CloseResponse()
				return
			}
			fc := fs.take(resp.GetCorrelationId())
			if fc == nil {
				continue // its forward gave up waiting for queue space
			}
			if e := resp.GetError(); e != nil {
				fc.finish(nil, produceError(e))
			} else {
				fc.finish(resp.GetResponse(), nil)
			}
		}
	}()
	return fs, nil
}

// fail breaks the stream: every pending call and every later forward on it
// fail with UNAVAILABLE (the producer retries; the next forward opens a
// new stream).
func (fs *fwdStream) fail(cause error) {
	fs.mu.Lock()
	if fs.err == nil {
		fs.err = retry("forwarding to the owner at %s broke: %w; retry", fs.addr, cause)
	}
	pending := fs.pending
	fs.pending = make(map[uint64]*forwardCall)
	err := fs.err
	fs.mu.Unlock()
	for _, fc := range pending {
		fc.finish(nil, err)
	}
	fs.cancel()
}

// closeForwarding ends the forwarding streams and waits for their
// goroutines (shutdown, after the client streams were answered).
func (s *Service) closeForwarding() {
	s.fwdMu.Lock()
	s.fwdClosed = true
	streams := make([]*fwdStream, 0, len(s.fwdStreams))
	for _, fs := range s.fwdStreams {
		streams = append(streams, fs)
	}
	clear(s.fwdStreams)
	s.fwdMu.Unlock()
	s.fwdCancel()
	for _, fs := range streams {
		fs.fail(errors.New("ingest copy shutting down"))
	}
	s.fwdWG.Wait()
}

// produceError turns the owner's answer back into the error it was, with
// its code, reason and retry delay, for the client the batches came from.
func produceError(e *sluicev1.ProduceError) *connect.Error {
	code := connect.Code(e.GetCode())
	if code == 0 || code > connect.CodeUnauthenticated {
		code = connect.CodeUnknown
	}
	ce := connect.NewError(code, errors.New(e.GetMessage()))
	if ms := e.GetRetryAfterMs(); ms > 0 {
		if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(ms) * time.Millisecond)}); err == nil {
			ce.AddDetail(d)
		}
	}
	if r := e.GetReason(); r != "" {
		ce = apierr.WithReason(ce, r, nil)
	}
	return ce
}
