package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/partlog"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// A triggerWorker runs one partition of one trigger, for as long as the
// trigger's member holds the partition's lease at one epoch (docs/DESIGN.md,
// "Triggers"). One goroutine, run; stop (the lease revoked, the runner
// stopping) is seen between invocations: the invocation in flight finishes
// and, if it succeeded, is committed.
//
// A round takes up to BatchSize × Parallelization records from the
// partition (waiting up to BatchWindowMs for that many), splits them into
// Parallelization lanes by key hash (records of one key always in the same
// lane, in offset order; with one lane, the round is the records in order),
// and runs the lanes at once: each cuts its records into invocations
// (Encoder.Take: BatchSize and MaxBatchBytes), invokes them one after
// another through the retry rules (process), and the round ends when every
// lane is done. The offset after the round is then committed with the
// lease epoch; with one lane, progress within the round (a partial batch
// failure) is committed as it happens too. A zombie — a copy whose lease
// moved — cannot commit: bookkeeping fences the epoch.
//
// Same batch, same invocation id, even across owners: before a round
// runs, its range and the epoch its ids carry are committed with the
// position (the commit metadata's "round", merged with the commit of the
// previous round's progress, so still one commit per round). A worker that
// takes the partition over (its owner died mid-round) finds the round
// there and runs exactly those records again first, cut into the same
// batches, under the ids of the first attempt — so a function can make
// its side effects idempotent by the id. Only the round in flight repeats.
type triggerWorker struct {
	r         *triggerRunner
	partition int32
	epoch     int64
	// next is the first offset not finished: everything before it was
	// invoked successfully or sent to the DLQ (and committed, or being).
	next int64
	// round is the round in flight (nil between rounds), committed before
	// it runs; resume is the one a previous owner left unfinished, to run
	// first. idEpoch is the epoch the invocation ids of the round carry.
	round, resume *triggerRound
	idEpoch       int64
	// doneDue: a round finished and its progress is not committed yet
	// (the next round's commit carries it, or a wait commits it first).
	doneDue bool

	wake     chan struct{} // buffered 1: new data (partlog.Follow)
	stop     chan struct{} // closed by halt
	stopOnce sync.Once

	mu        sync.Mutex // guards the fields below (DescribeTrigger reads them); a leaf
	status    string     // partitionRunning, partitionStopped, partitionBackingOff
	lastErr   string
	lastErrAt time.Time
	committed int64 // last committed offset (-1: none yet)
	metadata  string
}

// Partition states shown by DescribeTrigger.
const (
	partitionRunning    = "RUNNING"
	partitionBackingOff = "BACKING_OFF"
	partitionStopped    = "STOPPED"
)

// errTriggerStopped ends a worker whose lease was revoked or whose runner
// is stopping.
var errTriggerStopped = errors.New("trigger partition stopping")

// errLeaseMoved ends a worker whose commit was fenced: the lease moved.
var errLeaseMoved = errors.New("the partition's lease moved to another member")

func (w *triggerWorker) halt() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *triggerWorker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// setStatus sets the partition's state (and its last error, if err) and
// reports whether the state changed.
func (w *triggerWorker) setStatus(status string, err error) (changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed = w.status != status
	w.status = status
	if err != nil {
		w.lastErr, w.lastErrAt = clipText(err.Error(), maxTriggerErrorText), time.Now()
	}
	return changed
}

// publishStatus stores the partition's state with its committed position
// (the same offset again: only the metadata changes), so DescribeTrigger
// answered by any copy shows a partition backing off, not only this one's.
func (w *triggerWorker) publishStatus(ctx context.Context) {
	w.mu.Lock()
	at := w.committed
	w.mu.Unlock()
	if at >= 0 {
		_ = w.commit(ctx, at) // best effort: fenced or failing, the next commit says it
	}
}

// maxTriggerErrorText bounds an error kept for DescribeTrigger, the DLQ
// headers and the commit metadata.
const maxTriggerErrorText = 512

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sleep waits d, or until the worker stops or ctx ends (then false).
func (w *triggerWorker) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// run is the worker's goroutine.
func (w *triggerWorker) run(ctx context.Context) {
	r := w.r
	s := r.s
	k := tp{Topic: r.tr.Topic, Partition: w.partition}
	unfollow := s.logs.Follow(k.Topic, int(k.Partition), w.wake)
	defer func() {
		unfollow()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.m.release(rctx, k)
		cancel()
		r.workerDone(w)
	}()
	log := s.log.With(slog.String("trigger", r.tr.Name), slog.String("topic", k.Topic), slog.Int("partition", int(k.Partition)), slog.Int64("epoch", w.epoch))
	w.idEpoch = w.epoch
	w.adopt(ctx, log)
	// Pin the start: a trigger starting at "latest" or a timestamp keeps
	// the offset it resolved even if no record comes before the lease
	// moves.
	if err := w.commit(ctx, w.next); err != nil {
		log.Debug("trigger worker ends before its first round", slog.Any("err", err))
		return
	}
	log.Info("trigger partition started", slog.Int64("offset", w.next))
	err := w.loop(ctx, log)
	switch {
	case errors.Is(err, errTriggerStopped), errors.Is(err, errLeaseMoved), ctx.Err() != nil:
		_ = w.commit(ctx, w.next) // what finished before the stop (a no-op if stored; fenced or canceled, nothing changes)
		log.Info("trigger partition ended", slog.Int64("offset", w.next), slog.Any("cause", err))
	default:
		// Stopped on a failure it must not skip: keep the lease (so no
		// other copy runs it) until the trigger changes or the lease
		// moves, and report it.
		w.setStatus(partitionStopped, err)
		log.Error("trigger stopped on this partition; update the trigger (or set on_failure_topic) to go on", slog.Int64("offset", w.next), slog.Any("err", err))
		_ = w.commit(ctx, w.next)
		select {
		case <-w.stop:
		case <-ctx.Done():
		}
	}
}

// adopt reads what the previous owner committed with the position: the
// last error (kept for DescribeTrigger) and an unfinished round to run
// again first under its ids.
func (w *triggerWorker) adopt(ctx context.Context, log *slog.Logger) {
	r := w.r
	c, err := r.s.d.Bookkeeping.FetchOffset(ctx, r.group, r.tr.Topic, w.partition)
	if err != nil || c.Offset != w.next || c.TopicID != string(r.tr.TopicID) || c.Metadata == "" {
		return
	}
	var md triggerMetadata
	if json.Unmarshal([]byte(c.Metadata), &md) != nil {
		return
	}
	w.mu.Lock()
	w.lastErr = md.LastError
	if md.LastErrAt > 0 {
		w.lastErrAt = time.UnixMilli(md.LastErrAt)
	}
	w.mu.Unlock()
	if rd := md.Round; rd != nil && rd.First <= w.next && w.next <= rd.Last && rd.Epoch > 0 && rd.Epoch < w.epoch {
		w.resume = rd
		log.Info("trigger partition resumes a round its previous owner left unfinished, under the same invocation ids",
			slog.Int64("first", rd.First), slog.Int64("last", rd.Last), slog.Int64("id_epoch", rd.Epoch))
	}
}

func (w *triggerWorker) loop(ctx context.Context, log *slog.Logger) error {
	r := w.r
	spec := r.spec
	roundMax := spec.BatchSize * spec.Parallelization
	var pending []record.Record
	readAt := w.next
	var firstSeen time.Time
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	wait := func(d time.Duration) error {
		if w.doneDue {
			// Before waiting, the finished round's progress is stored.
			w.doneDue = false
			if err := w.commit(ctx, w.next); err != nil {
				return err
			}
		}
		idle.Reset(d)
		select {
		case <-w.wake:
		case <-idle.C:
		case <-w.stop:
			return errTriggerStopped
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	readFails := 0
	for {
		if w.stopping() {
			return errTriggerStopped
		}
		want := roundMax - len(pending)
		if w.resume != nil {
			want = int(min(max(w.resume.Last-readAt+1, 0), int64(MaxMaxRecords)))
		}
		if want > 0 {
			res, err := w.read(ctx, readAt, want)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, errBelowLogStart):
				// Retention passed the position: go on at the log start
				// (records were never invoked; logged, like a group's
				// reset by its start policy).
				start, _, berr := r.s.logs.Bounds(ctx, r.tr.Topic, int(w.partition))
				if berr != nil {
					return berr
				}
				log.Warn("trigger position below the log start (retention): going on at the log start", slog.Int64("offset", readAt), slog.Int64("log_start", start))
				pending, readAt, w.next, w.resume = nil, start, start, nil
				continue
			case connect.CodeOf(err) == connect.CodeDataLoss:
				return err // never skip corrupt data
			case err != nil:
				readFails++
				w.setStatus(partitionBackingOff, fmt.Errorf("read: %w", err))
				if err := wait(min(time.Duration(readFails)*100*time.Millisecond, 5*time.Second)); err != nil {
					return err
				}
				continue
			}
			readFails = 0
			if len(res.Records) > 0 && len(pending) == 0 {
				firstSeen = time.Now()
			}
			pending = append(pending, res.Records...)
			readAt = max(readAt, res.Next)
		}
		if len(pending) == 0 {
			if err := wait(r.s.cfg.BalanceInterval); err != nil {
				return err
			}
			continue
		}
		if w.resume != nil && pending[len(pending)-1].Offset < w.resume.Last && readAt <= w.resume.Last {
			// The unfinished round's records are not all read yet.
			if err := wait(10 * time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if window := time.Duration(spec.BatchWindowMs) * time.Millisecond; w.resume == nil && window > 0 && len(pending) < roundMax {
			if left := window - time.Since(firstSeen); left > 0 {
				if err := wait(left); err != nil {
					return err
				}
				continue
			}
		}
		// Records past their age are not invoked: DLQ (or stop).
		if spec.MaxRecordAgeMs > 0 {
			oldest := time.Now().UnixMilli() - spec.MaxRecordAgeMs
			n := 0
			for n < len(pending) && pending[n].Timestamp < oldest {
				n++
			}
			if n > 0 {
				cause := fmt.Errorf("record older than max_record_age_ms %d", spec.MaxRecordAgeMs)
				if err := w.fail(ctx, pending[:n], cause, 0); err != nil {
					return err
				}
				w.next = pending[n-1].Offset + 1
				if err := w.commit(ctx, w.next); err != nil {
					return err
				}
				pending = pending[n:]
				continue
			}
		}
		n := min(len(pending), roundMax)
		w.idEpoch = w.epoch
		if rd := w.resume; rd != nil {
			n = 0
			for n < len(pending) && pending[n].Offset <= rd.Last {
				n++
			}
			w.idEpoch, w.resume = rd.Epoch, nil
		}
		round := pending[:n]
		w.round = &triggerRound{First: round[0].Offset, Last: round[n-1].Offset, Epoch: w.idEpoch}
		w.doneDue = false
		if err := w.commit(ctx, round[0].Offset); err != nil { // the round, with the progress before it
			return err
		}
		if err := w.runRound(ctx, round); err != nil {
			return err
		}
		w.round, w.doneDue = nil, true
		pending = pending[len(round):]
		if len(pending) == 0 {
			firstSeen = time.Time{}
		} else {
			firstSeen = time.Now()
		}
	}
}

// maxInvokeTime bounds one Invoke call: Lambda's longest function timeout
// (15 minutes) and a minute for the answer. An invocation that takes longer
// is given up as Transient (retried, the same id).
const maxInvokeTime = 16 * time.Minute

// errBelowLogStart: the worker's position is below the log start.
var errBelowLogStart = errors.New("offset below the log start")

// read reads up to n records at offset (none at the end of the log).
func (w *triggerWorker) read(ctx context.Context, offset int64, n int) (partlog.Result, error) {
	r := w.r
	if hw := r.s.logs.HighWatermark(r.tr.Topic, int(w.partition)); hw >= 0 && hw <= offset {
		return partlog.Result{Next: offset}, nil
	}
	res, err := r.s.read(ctx, r.tr.Topic, int(w.partition), offset, partlog.Limits{MaxRecords: n, MaxBytes: r.spec.MaxBatchBytes, ReadCommitted: !r.spec.ReadUncommitted})
	if err != nil {
		if connect.CodeOf(err) == connect.CodeOutOfRange {
			if start, _, berr := r.s.logs.Bounds(ctx, r.tr.Topic, int(w.partition)); berr == nil && offset < start {
				return res, errBelowLogStart
			}
			return partlog.Result{Next: offset}, nil // past the end: wait for the log
		}
		return res, err
	}
	return res, nil
}

// runRound runs one round's records through their lanes (see
// triggerWorker). Progress within a one-lane round is committed as it
// happens; the round's end is committed by the caller.
func (w *triggerWorker) runRound(ctx context.Context, recs []record.Record) error {
	lanes := w.r.lanes(recs)
	if len(lanes) == 1 {
		done, err := w.lane(ctx, lanes[0], true)
		if done > 0 {
			w.next = lanes[0][done-1].Offset + 1
		}
		return err
	}
	dones := make([]int, len(lanes))
	errs := make([]error, len(lanes))
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Go(func() { dones[i], errs[i] = w.lane(ctx, l, false) })
	}
	wg.Wait()
	// The partition's position is the first record no lane finished; the
	// records after it that other lanes finished run again later
	// (at-least-once), in their key's order.
	next := recs[len(recs)-1].Offset + 1
	for i, l := range lanes {
		if dones[i] < len(l) {
			next = min(next, l[dones[i]].Offset)
		}
	}
	w.next = next
	if err := errors.Join(errs...); err != nil {
		if next > recs[0].Offset {
			_ = w.commit(ctx, next)
		}
		return firstStop(errs)
	}
	return nil
}

// firstStop is the error that ends the worker among lanes' errors: a
// stop or a moved lease before a failure (the failure runs again later).
func firstStop(errs []error) error {
	var other error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, errTriggerStopped), errors.Is(err, errLeaseMoved), errors.Is(err, context.Canceled):
			return err
		case other == nil:
			other = err
		}
	}
	return other
}

// lanes splits a round's records into the trigger's lanes by key hash,
// each in offset order; empty lanes are left out. Records without a key
// go by offset.
func (r *triggerRunner) lanes(recs []record.Record) [][]record.Record {
	n := r.spec.Parallelization
	if n <= 1 {
		return [][]record.Record{recs}
	}
	out := make([][]record.Record, n)
	for _, rec := range recs {
		var i int
		if rec.Key == nil {
			i = int(rec.Offset % int64(n))
		} else {
			h := fnv.New32a()
			_, _ = h.Write(rec.Key)
			i = int(h.Sum32() % uint32(n))
		}
		out[i] = append(out[i], rec)
	}
	kept := out[:0]
	for _, l := range out {
		if len(l) > 0 {
			kept = append(kept, l)
		}
	}
	return kept
}

// lane invokes a lane's records in order, cut into batches, and returns
// how many leading records are finished (invoked successfully or sent to
// the DLQ). commitProgress commits within the lane (one lane per round).
func (w *triggerWorker) lane(ctx context.Context, recs []record.Record, commitProgress bool) (int, error) {
	done := 0
	for done < len(recs) {
		batch, payload, err := w.r.enc.Take(w.r.tr.Topic, w.partition, recs[done:])
		if err != nil {
			// A record that can never be invoked (too large, a timestamp
			// the event cannot carry) is a failure of its own.
			if ferr := w.fail(ctx, recs[done:done+1], err, 0); ferr != nil {
				return done, ferr
			}
			done++
			continue
		}
		n, err := w.process(ctx, batch, payload, commitProgress)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// process invokes one batch through the retry rules (trigger.Run: the
// pure machine decides; this does the invoking, waiting, committing and
// failing) and returns how many of its leading records are finished;
// fewer than all only with an error (the worker stops, or the partition
// stops on a failure without a DLQ). commitProgress commits the position
// after records finished within the batch (one lane per round).
func (w *triggerWorker) process(ctx context.Context, batch trigger.Batch, payload []byte, commitProgress bool) (int, error) {
	r := w.r
	run := trigger.NewRun(r.pol, batch.Records)
	for {
		recs, more := run.Next()
		if !more {
			return run.Finished(), nil
		}
		b := trigger.Batch{Topic: batch.Topic, Partition: batch.Partition, Records: recs}
		if payload == nil {
			// A part of a batch that fit fits: Take returns it whole.
			var err error
			if b, payload, err = r.enc.Take(batch.Topic, batch.Partition, recs); err != nil || len(b.Records) != len(recs) {
				return run.Finished(), fmt.Errorf("re-encoding records %d..%d of a batch: %d of %d taken: %w", recs[0].Offset, recs[len(recs)-1].Offset, len(b.Records), len(recs), err)
			}
		}
		if ctx.Err() != nil {
			return run.Finished(), ctx.Err()
		}
		if err := w.awaitLive(ctx); err != nil {
			return run.Finished(), err
		}
		if err := w.awaitAuthorized(ctx); err != nil {
			return run.Finished(), err
		}
		id := trigger.InvocationID(trigger.InvocationKey{Trigger: r.tr.Name, Topic: r.tr.Topic, TopicID: r.tr.TopicID, Partition: w.partition,
			FirstOffset: b.FirstOffset(), LastOffset: b.LastOffset(), LeaseEpoch: w.idEpoch})
		start := time.Now()
		ictx, cancel := context.WithTimeout(ctx, maxInvokeTime)
		ictx, span := r.s.triggers.tracer.start(ictx, r.tr.Name, r.spec.Function, b)
		res := r.s.triggers.invoker.Invoke(ictx, r.spec.Function, id, b, payload)
		cancel()
		r.s.triggers.tracer.end(span, res)
		r.s.triggers.meters.invoked(ctx, r.tr.Name, res, len(recs), time.Since(start), recs[0].Timestamp)
		if ctx.Err() != nil {
			return run.Finished(), ctx.Err()
		}
		payload = nil
		st := run.Observe(res, r.rnd())
		if len(st.Fail) > 0 {
			if err := w.fail(ctx, st.Fail, st.Cause, st.Attempts); err != nil {
				return st.FailAt, err
			}
		}
		if st.BackingOff != nil {
			if w.setStatus(partitionBackingOff, st.BackingOff) {
				w.publishStatus(ctx)
			}
		} else if len(st.Fail) == 0 {
			w.setStatus(partitionRunning, nil)
		}
		if _, next := run.Next(); st.Progress && commitProgress && next && run.Finished() > 0 {
			if err := w.commit(ctx, batch.Records[run.Finished()-1].Offset+1); err != nil {
				return run.Finished(), err
			}
		}
		if st.Wait > 0 && !w.sleep(ctx, st.Wait) {
			return run.Finished(), stopCause(ctx)
		}
	}
}

// awaitAuthorized waits until the trigger's principal may run it
// (Deps.AuthorizeTrigger), backing off with the refusal as the
// partition's status meanwhile; it returns the stop's cause if the worker
// is stopped first.
func (w *triggerWorker) awaitAuthorized(ctx context.Context) error {
	check := w.r.s.d.AuthorizeTrigger
	if check == nil {
		return nil
	}
	for {
		err := check(w.r.spec)
		if err == nil {
			return nil
		}
		if w.setStatus(partitionBackingOff, err) {
			w.publishStatus(ctx)
		}
		if !w.sleep(ctx, TriggerAuthzRecheck) {
			return stopCause(ctx)
		}
	}
}

// awaitLive waits until the member is surely still the lease's owner
// (member.live) before the worker starts work on the partition; it returns
// errTriggerStopped if the worker is stopped meanwhile (the member found
// itself expired and dropped its leases).
func (w *triggerWorker) awaitLive(ctx context.Context) error {
	for !w.r.m.live() {
		if !w.sleep(ctx, 20*time.Millisecond) {
			return stopCause(ctx)
		}
	}
	if w.stopping() {
		return errTriggerStopped
	}
	return nil
}

func stopCause(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errTriggerStopped
}

// fail deals with records that ran out of retries or age: with an
// on_failure_topic they are produced there (retried until stored: never
// dropped) and the trigger goes on; without one the error is returned and
// the partition stops.
func (w *triggerWorker) fail(ctx context.Context, recs []record.Record, cause error, attempts int) error {
	r := w.r
	if len(recs) == 0 {
		return nil
	}
	if r.spec.OnFailureTopic == "" {
		return fmt.Errorf("records %d..%d failed and the trigger has no on_failure_topic: %w", recs[0].Offset, recs[len(recs)-1].Offset, cause)
	}
	if r.s.triggers.dlq == nil {
		return fmt.Errorf("records %d..%d failed and this fetch copy has no producer for on_failure_topic %q (start it with an ingest address): %w",
			recs[0].Offset, recs[len(recs)-1].Offset, r.spec.OnFailureTopic, cause)
	}
	req := &sluicev1.ProduceRequest{Topic: r.spec.OnFailureTopic}
	text := clipText(cause.Error(), maxTriggerErrorText)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, rec := range recs {
		hs := make([]*sluicev1.Header, 0, len(rec.Headers)+8)
		for _, h := range rec.Headers {
			hs = append(hs, &sluicev1.Header{Key: h.Key, Value: h.Value})
		}
		for _, h := range [][2]string{
			{DLQHeaderTrigger, r.tr.Name}, {DLQHeaderFunction, r.spec.Function},
			{DLQHeaderTopic, r.tr.Topic}, {DLQHeaderPartition, strconv.Itoa(int(w.partition))},
			{DLQHeaderOffset, strconv.FormatInt(rec.Offset, 10)}, {DLQHeaderError, text},
			{DLQHeaderAttempts, strconv.Itoa(attempts)}, {DLQHeaderFailedAt, now},
		} {
			hs = append(hs, &sluicev1.Header{Key: h[0], Value: []byte(h[1])})
		}
		req.Records = append(req.Records, &sluicev1.Record{Key: rec.Key, Value: rec.Value, Headers: hs, Timestamp: rec.Timestamp})
	}
	for attempt := 1; ; attempt++ {
		if err := w.awaitLive(ctx); err != nil {
			return err
		}
		_, err := r.s.triggers.dlq.Produce(ctx, connect.NewRequest(req))
		if err == nil {
			r.s.triggers.meters.dlq(ctx, r.tr.Name, len(recs))
			w.setStatus(partitionRunning, fmt.Errorf("%s sent to %s: %w", trigger.Plural(len(recs), "record"), r.spec.OnFailureTopic, cause))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.setStatus(partitionBackingOff, fmt.Errorf("producing %d failed records to on_failure_topic %q: %w", len(recs), r.spec.OnFailureTopic, err))
		if !w.sleep(ctx, r.pol.Backoff(min(attempt, 30), r.rnd())+100*time.Millisecond) {
			return stopCause(ctx)
		}
	}
}

// Headers of the records a trigger sends to its on_failure_topic (each
// record keeps its key, value, timestamp and own headers).
const (
	DLQHeaderTrigger   = "sluice.trigger"
	DLQHeaderFunction  = "sluice.trigger.function"
	DLQHeaderTopic     = "sluice.source.topic"
	DLQHeaderPartition = "sluice.source.partition"
	DLQHeaderOffset    = "sluice.source.offset"
	DLQHeaderError     = "sluice.trigger.error"
	DLQHeaderAttempts  = "sluice.trigger.attempts"
	DLQHeaderFailedAt  = "sluice.trigger.failed_at_ms"
)

// triggerMetadata is the commit metadata of a trigger's partition: its
// last error and when, so DescribeTrigger shows them from any copy.
type triggerMetadata struct {
	Status    string        `json:"status,omitempty"`
	LastError string        `json:"last_error,omitempty"`
	LastErrAt int64         `json:"last_error_at_ms,omitempty"`
	Round     *triggerRound `json:"round,omitempty"`
}

// triggerRound is a round in flight: its records' offsets and the epoch
// its invocation ids carry.
type triggerRound struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	Epoch int64 `json:"epoch"`
}

// commit stores offset with the lease epoch (and the partition's status
// as metadata), retrying until stored, fenced, or the worker stops.
func (w *triggerWorker) commit(ctx context.Context, offset int64) error {
	r := w.r
	w.mu.Lock()
	md := triggerMetadata{Status: w.status, LastError: w.lastErr, Round: w.round}
	if md.Round == nil {
		md.Round = w.resume // not run yet: still owed
	}
	if !w.lastErrAt.IsZero() {
		md.LastErrAt = w.lastErrAt.UnixMilli()
	}
	same := w.committed == offset
	w.mu.Unlock()
	js, _ := json.Marshal(md)
	if len(js) > bookkeeping.MaxMetadataBytes {
		md.LastError = clipText(md.LastError, 200)
		js, _ = json.Marshal(md)
	}
	if same && string(js) == w.metadataSnapshot() {
		return nil
	}
	c := bookkeeping.Commit{Group: r.group, Topic: r.tr.Topic, TopicID: string(r.tr.TopicID), Member: r.m.memberID,
		Offsets: []bookkeeping.PartitionOffset{{Partition: w.partition, Offset: offset, Epoch: w.epoch, Metadata: string(js)}}}
	for attempt := 1; ; attempt++ {
		err := r.s.d.Bookkeeping.Commit(ctx, c)
		if err == nil {
			w.mu.Lock()
			w.committed, w.metadata = offset, string(js)
			w.mu.Unlock()
			return nil
		}
		var fe *bookkeeping.FencedError
		if errors.As(err, &fe) || errors.Is(err, bookkeeping.ErrFenced) {
			return fmt.Errorf("%w: %w", errLeaseMoved, err)
		}
		var re *bookkeeping.OffsetRegressionError
		if errors.As(err, &re) {
			// Stored further already (a status-only commit racing a
			// lane's): nothing to do.
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.s.log.Warn("trigger commit failed; retrying", slog.String("trigger", r.tr.Name), slog.Int("partition", int(w.partition)), slog.Any("err", err))
		if attempt >= 5 && w.stopping() {
			return errTriggerStopped
		}
		t := time.NewTimer(min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (w *triggerWorker) metadataSnapshot() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.metadata
}
