package sluice

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// closeGrace bounds how long Close waits for the server to end the stream
// after the producer closed its side (nothing is in flight by then).
const closeGrace = 5 * time.Second

// session is one ProduceStream and its two goroutines: the sender writes
// the requests the loop queues in out; the receiver reads answers and
// settles batches. Both are owned by the loop, which waits for them (wg)
// before it requeues the batches left in flight and opens the next stream.
type session struct {
	stream   *connect.BidiStreamForClient[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]
	cancel   context.CancelFunc
	ctx      context.Context
	wg       sync.WaitGroup
	recvDone chan struct{}
	outWake  chan struct{} // cap 1

	// Guarded by Producer.mu.
	out      []*sluicev1.ProduceStreamRequest
	corrs    map[uint64]*batch // batches sent and not answered
	closeReq bool              // the sender closes the request side after out
	broken   bool              // the stream failed or is closing: no more sends
	err      error             // why it broke
	answered bool              // an answer came: the server was reachable
}

// loop is the producer's scheduler: it seals batches whose linger passed,
// fails batches past their delivery timeout, re-sequences partitions after
// a hole, (re)opens the stream, and hands batches to the sender within the
// in-flight bounds. It owns the sessions. It exits when Close closes stop.
func (p *Producer) loop() {
	defer close(p.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if s := p.sess; s != nil && s.broken {
			p.mu.Unlock()
			s.wg.Wait()
			p.mu.Lock()
			p.teardown(s, time.Now())
		}
		now := time.Now()
		if p.pid == 0 && len(p.dirty) > 0 && !now.Before(p.pidRetryAt) {
			// The producer id comes before the first send.
			p.mu.Unlock()
			id, err := p.initPID()
			p.mu.Lock()
			now = time.Now()
			p.adoptPID(id, err, now)
		}
		p.fireTimers(now)
		p.pumpAll(now)
		next := p.timers.next()
		if p.sess == nil && len(p.dirty) > 0 && (next.IsZero() || p.reconnectAt.Before(next)) {
			next = p.reconnectAt
		}
		if p.pid == 0 && len(p.dirty) > 0 && (next.IsZero() || p.pidRetryAt.Before(next)) {
			next = p.pidRetryAt
		}
		p.armed = next
		p.mu.Unlock()
		if next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(max(time.Until(next), 0))
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.stop:
			p.shutdown()
			return
		}
	}
}

// shutdown ends the stream: gracefully (close the request side, let the
// server finish) unless Close gave up, in which case it is cancelled.
func (p *Producer) shutdown() {
	p.mu.Lock()
	s := p.sess
	p.sess = nil
	graceful := s != nil && !s.broken && !p.aborted
	if graceful {
		s.closeReq = true
		signal(s.outWake)
	}
	p.mu.Unlock()
	if s == nil {
		return
	}
	if graceful {
		t := time.NewTimer(closeGrace)
		select {
		case <-s.recvDone:
		case <-t.C:
		case <-p.runCtx.Done():
		}
		t.Stop()
	}
	s.cancel()
	s.wg.Wait()
}

// session returns the open stream, opening one if the reconnect backoff
// allows; nil if it does not. Called with p.mu held.
func (p *Producer) session(now time.Time) *session {
	if p.pid == 0 {
		return nil // InitProducer has not answered yet (loop)
	}
	if p.sess != nil {
		if p.sess.broken {
			return nil
		}
		return p.sess
	}
	if now.Before(p.reconnectAt) {
		return nil
	}
	ctx, cancel := context.WithCancel(p.runCtx)
	s := &session{
		stream: p.client.producer.ProduceStream(ctx), ctx: ctx, cancel: cancel,
		recvDone: make(chan struct{}), outWake: make(chan struct{}, 1),
		corrs: make(map[uint64]*batch),
	}
	p.sess = s
	s.wg.Go(func() { p.sender(s) })
	s.wg.Go(func() { p.receiver(s) })
	return s
}

// send puts b on the stream. Called with p.mu held.
func (p *Producer) send(s *session, b *batch, now time.Time) {
	ps := b.ps
	if p.cfg.idempotent && !b.numbered {
		p.number(ps, b)
	}
	p.corr++
	b.state, b.sess = stInflight, s
	b.attempts++
	ps.inflight++
	s.corrs[p.corr] = b
	req := &sluicev1.ProduceStreamRequest{
		CorrelationId: p.corr,
		AnyOrder:      true, // answers are matched by correlation id
		Request: &sluicev1.ProduceRequest{
			Topic:   ps.topic.name,
			Batches: []*sluicev1.EncodedBatch{{Partition: ps.id, Data: b.data}},
		},
	}
	if p.cfg.idempotent {
		req.ProducerId, req.ProducerEpoch = b.pid, int32(b.epoch)
	}
	b.reqBytes = proto.Size(req)
	s.out = append(s.out, req)
	signal(s.outWake)
	if h := p.cfg.hooks.OnBatchSent; h != nil {
		info := b.info(now)
		p.hook(func() { h(info) })
	}
}

// sender writes queued requests to the stream, in order. A blocked Send
// (flow control: the server reads at most its in-flight bound ahead) blocks
// only this goroutine.
func (p *Producer) sender(s *session) {
	for {
		select {
		case <-s.outWake:
		case <-s.ctx.Done():
			return
		}
		p.mu.Lock()
		out, closeReq := s.out, s.closeReq
		s.out = nil
		p.mu.Unlock()
		for _, m := range out {
			if err := s.stream.Send(m); err != nil {
				if !errors.Is(err, io.EOF) {
					p.breakSessionLocking(s, err)
				}
				// EOF: the server ended the stream; the receiver
				// gets its status and breaks the session with it.
				return
			}
		}
		if closeReq {
			if err := s.stream.CloseRequest(); err != nil {
				p.breakSessionLocking(s, err)
			}
			return
		}
	}
}

// receiver reads answers until the stream ends.
func (p *Producer) receiver(s *session) {
	defer close(s.recvDone)
	for {
		resp, err := s.stream.Receive()
		if err != nil {
			p.breakSessionLocking(s, err)
			_ = s.stream.CloseResponse()
			return
		}
		p.onResponse(s, resp)
	}
}

func (p *Producer) breakSessionLocking(s *session, err error) {
	p.mu.Lock()
	p.breakSession(s, err)
	p.mu.Unlock()
}

// breakSession marks the stream broken and cancels it; the loop tears it
// down. Called with p.mu held.
func (p *Producer) breakSession(s *session, err error) {
	if s.broken {
		return
	}
	s.broken, s.err = true, err
	s.cancel()
	signal(p.wake)
	if s.closeReq && errors.Is(err, io.EOF) {
		return // the graceful end
	}
	p.log.Warn("produce stream broken", slog.String("error", err.Error()), slog.Int("in_flight", len(s.corrs)))
	if h := p.cfg.hooks.OnStreamError; h != nil {
		p.hook(func() { h(err) })
	}
}

// teardown requeues the batches left in flight on a broken stream (their
// outcome is unknown: resending is safe with idempotence) and schedules
// the reconnect. Called with p.mu held, after the session's goroutines
// exited.
func (p *Producer) teardown(s *session, now time.Time) {
	if p.sess == s {
		p.sess = nil
	}
	if s.answered {
		p.streamFailures = 1
	} else {
		p.streamFailures++
	}
	p.reconnectAt = now.Add(p.backoff(p.streamFailures))
	err := fmt.Errorf("produce stream: %w", s.err)
	maxReq, overLimit := requestLimit(s.err)
	ids := make([]uint64, 0, len(s.corrs))
	for id := range s.corrs {
		ids = append(ids, id)
	}
	slices.Sort(ids) // hooks in send order
	touched := make(map[*partState]struct{})
	for _, id := range ids {
		b := s.corrs[id]
		if p.settleZombie(s, b, false, false) {
			touched[b.ps] = struct{}{}
			continue
		}
		if b.state != stInflight || b.sess != s {
			continue
		}
		ps := b.ps
		b.state, b.sess, b.lastErr = stQueued, nil, err
		ps.inflight--
		ps.rewind = true
		touched[ps] = struct{}{}
		if overLimit && b.reqBytes > maxReq {
			// The one the server refused (never read, so not stored):
			// sending it again cannot help.
			p.onBatchError(ps, b, s.err, now)
			continue
		}
		if h := p.cfg.hooks.OnBatchRetried; h != nil {
			info := b.info(now)
			p.hook(func() { h(info, err) })
		}
	}
	clear(s.corrs)
	for ps := range touched {
		p.expire(ps, now)
		p.complete(ps)
		p.markDirty(ps)
	}
}

// onResponse settles the batch an answer is for.
func (p *Producer) onResponse(s *session, resp *sluicev1.ProduceStreamResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := resp.GetCorrelationId()
	b, ok := s.corrs[id]
	if !ok {
		p.breakSession(s, fmt.Errorf("answer for unknown correlation id %d", id))
		return
	}
	delete(s.corrs, id)
	s.answered = true
	p.streamFailures = 0
	if p.settleZombie(s, b, true, resp.GetError() != nil || len(resp.GetResponse().GetResults()) != 1) {
		// Failed to its callbacks at its delivery deadline; the answer
		// only frees its slot (and marks a certain hole).
		p.complete(b.ps)
		return
	}
	if b.state != stInflight || b.sess != s {
		return // failed meanwhile (Close gave up)
	}
	ps, now := b.ps, time.Now()
	b.state, b.sess = stQueued, nil
	ps.inflight--
	if e := resp.GetError(); e != nil {
		p.onBatchError(ps, b, streamError(e.GetCode(), e.GetMessage(), e.GetRetryAfterMs(), e.GetReason()), now)
	} else if res := resp.GetResponse().GetResults(); len(res) != 1 {
		p.onBatchError(ps, b, connect.NewError(connect.CodeInternal, fmt.Errorf("server answered %d results for one batch", len(res))), now)
	} else {
		p.onAck(ps, b, res[0].GetOffset(), res[0].GetDuplicate(), deadLetter(res[0]), now)
	}
	p.expire(ps, now)
	p.complete(ps)
	p.markDirty(ps)
}

// pumpAll sends what the dirty partitions may send.
func (p *Producer) pumpAll(now time.Time) {
	for ps := range p.dirty {
		if p.pump(ps, now) {
			delete(p.dirty, ps)
		}
	}
}

// Timers: one heap of events; stale ones are ignored when they fire.

type timerKind uint8

const (
	evLinger   timerKind = iota + 1 // seal the open batch (gen identifies it)
	evRetry                         // the partition's backoff ended
	evDeadline                      // the first batch's delivery deadline
)

type timerEvent struct {
	at   time.Time
	ps   *partState
	kind timerKind
	gen  uint64
}

type timerHeap []timerEvent

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEvent)) }
func (h *timerHeap) Pop() any {
	old := *h
	ev := old[len(old)-1]
	old[len(old)-1] = timerEvent{}
	*h = old[:len(old)-1]
	return ev
}

// next is the earliest event's time, zero if none.
func (h timerHeap) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].at
}

// schedule adds a timer event and wakes the loop if it is earlier than the
// loop's timer. Called with p.mu held.
func (p *Producer) schedule(ev timerEvent) {
	heap.Push(&p.timers, ev)
	if p.armed.IsZero() || ev.at.Before(p.armed) {
		signal(p.wake)
	}
}

// fireTimers handles the events due at now. It takes them off the heap
// first: handling one may schedule another that is already due (a batch in
// flight past its deadline re-arms its deadline while its stream is being
// torn down), which then waits for the loop's next round instead of
// spinning here.
func (p *Producer) fireTimers(now time.Time) {
	var due []timerEvent
	for len(p.timers) > 0 && !p.timers[0].at.After(now) {
		due = append(due, heap.Pop(&p.timers).(timerEvent))
	}
	for _, ev := range due {
		ps := ev.ps
		switch ev.kind {
		case evLinger:
			if ps.open != nil && ps.openGen == ev.gen {
				p.seal(ps)
			}
		case evRetry:
			if ps.retryArmed.Equal(ev.at) {
				ps.retryArmed = time.Time{}
			}
			p.markDirty(ps)
		case evDeadline:
			if ps.deadlineArmed.Equal(ev.at) {
				ps.deadlineArmed = time.Time{}
			}
			p.expire(ps, now)
			p.complete(ps)
		}
	}
}

// deadLetter is the SDK's form of a result's dead-letter mark, or nil.
func deadLetter(r *sluicev1.ProduceResult) *DeadLetter {
	d := r.GetDeadLetter()
	if d == nil {
		return nil
	}
	return &DeadLetter{Topic: d.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(), Reason: d.GetReason(), SchemaID: d.GetSchemaId()}
}
