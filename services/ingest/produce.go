package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// forwardedHeader marks a produce forwarded by another copy, so it is never
// forwarded twice (ownership moving under a forward answers UNAVAILABLE).
const forwardedHeader = "Sluice-Forwarded"

// plan is a validated produce request, cut into one batch per partition.
type plan struct {
	topic catalog.Topic
	// parts holds, per target partition, the batches in request order.
	parts map[int]*partPlan
	// results says where each result comes from: a partition and the index
	// of its batch there, plus the record's position within that batch.
	results []resultRef
	// bytes is what the request counts against its client's quota.
	bytes int
	// held is what the request holds of the copy's buffer budget.
	held int64
	// dlq is the produce of the records the topic's schema refused to its
	// dead-letter topic (schemas.go), or nil.
	dlq *plan
}

// batchBytes is the size of the plan's batches, its dead letters' too.
func (pl *plan) batchBytes() int64 {
	var n int64
	for _, pp := range pl.parts {
		for _, b := range pp.batches {
			n += int64(len(b))
		}
	}
	if pl.dlq != nil {
		n += pl.dlq.batchBytes()
	}
	return n
}

// admit takes the plan's batch bytes from the copy's buffer budget, or
// answers RESOURCE_EXHAUSTED with a retry delay after BufferWait.
func (s *Service) admit(ctx context.Context, pl *plan) error {
	n := pl.batchBytes()
	if !s.buffered.acquire(ctx, n, s.cfg.BufferWait) {
		if ctx.Err() != nil {
			return apierr.FromCatalog(context.Cause(ctx))
		}
		return apierr.Exhausted(s.cfg.RetryAfter, fmt.Errorf("this ingest copy holds %d bytes of unanswered produce requests, its limit; retry later", s.cfg.MaxBufferedBytes))
	}
	pl.held = n
	return nil
}

// done returns the plan's bytes to the budget.
func (s *Service) done(pl *plan) {
	if pl != nil && pl.held > 0 {
		s.buffered.release(pl.held)
		pl.held = 0
	}
}

type partPlan struct {
	batches [][]byte
	// filled by start:
	pending []partition.Pending
	forward *forwardCall
	done    []partition.Appended
	dup     []bool
	err     error
}

type resultRef struct {
	partition int
	batch     int
	delta     int64 // record's offset within the batch (0 for batches)
	// dead marks a record (or batch) dead-lettered: its result is the
	// dead-letter plan's result deadAt (partition and batch are unused).
	dead   *sluicev1.DeadLetter
	deadAt int
}

type forwardCall struct {
	done chan struct{}
	resp *sluicev1.ProduceResponse
	err  error
}

// trustsForwarding reports whether the forwarded header of a call is
// believed: always without authorization (nothing is secured), else only
// from the cluster's own processes — a client setting it would skip the
// owner's transaction checks.
func (s *Service) trustsForwarding(ctx context.Context) bool {
	if s.d.Authorize == nil {
		return true
	}
	p, ok := auth.FromContext(ctx)
	return ok && p.Kind == auth.Service
}

// Produce appends records and answers once they are durable.
func (s *Service) Produce(ctx context.Context, req *connect.Request[sluicev1.ProduceRequest]) (_ *connect.Response[sluicev1.ProduceResponse], err error) {
	since := time.Now()
	forwarded := req.Header().Get(forwardedHeader) != "" && s.trustsForwarding(ctx)
	defer func() {
		if err != nil {
			s.m.failed(ctx, forwarded, err)
		}
	}()
	ctx, span := s.traceProduce(ctx, req.Msg) // tracing.go
	defer func() { endProduceSpan(span, err) }()
	client, err := quotaKey(ctx, req.Header().Get(clientIDHeader), forwarded)
	if err != nil {
		return nil, err
	}
	pl, err := s.prepare(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	if !forwarded {
		// Transactional batches need the stream's transactional id.
		if err := s.checkTxnBatches(ctx, "", pl); err != nil {
			return nil, err
		}
	}
	if err := s.admit(ctx, pl); err != nil {
		return nil, err
	}
	s.start(ctx, pl, forwarded)
	resp, err := s.finish(ctx, pl)
	s.done(pl)
	if err != nil {
		return nil, err
	}
	s.m.acked(ctx, pl, since, forwarded)
	if err := s.throttle(ctx, client, pl, resp); err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// clientIDHeader names the client for quotas (Kafka's client.id).
const clientIDHeader = "Sluice-Client-Id"

// forwardedKey is the quota key of a forwarded request: not charged
// again, since the copy the client called charged it (no header value
// holds a NUL byte, so no client id is this).
const forwardedKey = "\x00forwarded"

// quotaKey is who a request counts against: its authenticated principal
// when it has one (a client id header anyone can set must not let a
// principal dodge its quota), else its client id header; forwardedKey for
// a forwarded request.
func quotaKey(ctx context.Context, header string, forwarded bool) (string, error) {
	if len(header) > MaxClientIDLength {
		return "", apierr.TooLarge(clientIDHeader, apierr.ClientIDBytes, int64(len(header)), MaxClientIDLength)
	}
	if forwarded {
		return forwardedKey, nil
	}
	if p, ok := auth.FromContext(ctx); ok {
		return p.String(), nil
	}
	return header, nil
}

// throttle charges the request's bytes to the client's quota and, when it
// is over, delays the answer by the throttle time and reports it (Kafka's
// produce quotas: the client is slowed, its data is not refused).
func (s *Service) throttle(ctx context.Context, client string, pl *plan, resp *sluicev1.ProduceResponse) error {
	if client == forwardedKey {
		return nil
	}
	d := s.quotas.Record(client, pl.bytes, time.Now())
	if d <= 0 {
		return nil
	}
	resp.ThrottleTimeMs = int32(d.Milliseconds())
	s.m.throttledFor(ctx, d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return apierr.FromCatalog(context.Cause(ctx))
	}
}

// prepare validates a request and builds its per-partition batches.
func (s *Service) prepare(ctx context.Context, m *sluicev1.ProduceRequest) (*plan, error) {
	if m.GetTopic() == "" {
		return nil, apierr.Invalid("topic", "required")
	}
	recs, batches := m.GetRecords(), m.GetBatches()
	switch {
	case len(recs) == 0 && len(batches) == 0:
		return nil, apierr.Invalid("records", "at least one record (or batch) is required")
	case len(recs) > 0 && len(batches) > 0:
		return nil, apierr.Invalid("batches", "records and batches are mutually exclusive")
	case len(recs) > s.cfg.MaxRecords:
		return nil, apierr.TooLarge("records", apierr.RecordsPerRequest, int64(len(recs)), int64(s.cfg.MaxRecords))
	case len(batches) > s.cfg.MaxBatches:
		return nil, apierr.TooLarge("batches", apierr.BatchesPerRequest, int64(len(batches)), int64(s.cfg.MaxBatches))
	case m.Partition != nil && len(batches) > 0:
		return nil, apierr.Invalid("partition", "applies to records only; batches name their own partition")
	}
	ct, err := s.topic(ctx, m.GetTopic())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	t := ct.t
	// A batch is bounded by the topic's max.message.bytes, or by the
	// server's batch limit when that is lower: the answer names the one in
	// force.
	lim := s.cfg.Limits
	batchLimit := apierr.ServerBatchBytes
	if t.Config.MaxMessageBytes <= lim.MaxBatchBytes {
		lim.MaxBatchBytes, batchLimit = t.Config.MaxMessageBytes, apierr.MaxMessageBytes
	}
	sc, err := s.schemaCheck(t)
	if err != nil {
		return nil, err
	}
	var dead []*sluicev1.Record // records for the dead-letter topic
	pl := &plan{topic: t, parts: make(map[int]*partPlan)}
	part := func(p int) *partPlan {
		pp := pl.parts[p]
		if pp == nil {
			pp = &partPlan{}
			pl.parts[p] = pp
		}
		return pp
	}

	if len(batches) > 0 {
		for i, b := range batches {
			p := int(b.GetPartition())
			if p < 0 || p >= t.Partitions {
				return nil, apierr.Invalid(fmt.Sprintf("batches[%d].partition", i), "%d outside [0, %d) of topic %q", p, t.Partitions, t.Name)
			}
			if sc == nil {
				if err := record.Validate(b.GetData(), lim); err != nil {
					return nil, formatError(fmt.Sprintf("batches[%d].data", i), err, batchLimit)
				}
			} else {
				recs, inv, err := sc.checkBatch(ctx, i, b.GetData(), p, lim)
				if err != nil {
					return nil, batchCheckError(fmt.Sprintf("batches[%d].data", i), err, batchLimit)
				}
				if recs != nil {
					pl.results = append(pl.results, resultRef{dead: sc.deadResult(inv), deadAt: len(dead)})
					dead = append(dead, recs...)
					continue
				}
			}
			if bt := record.Batch(b.GetData()); bt.Attributes().Transactional() && bt.ProducerID() == record.NoProducerID {
				return nil, apierr.Invalid(fmt.Sprintf("batches[%d].data.producerId", i), "a transactional batch needs the producer id InitProducer gave its transactional id")
			}
			pp := part(p)
			pl.results = append(pl.results, resultRef{partition: p, batch: len(pp.batches)})
			pp.batches = append(pp.batches, b.GetData())
			pl.bytes += len(b.GetData())
		}
		return s.withDeadLetters(ctx, pl, dead)
	}

	// Plain records: choose partitions, then build one batch per partition.
	explicit := int32(-1)
	if m.Partition != nil {
		explicit = m.GetPartition()
		if explicit < 0 || int(explicit) >= t.Partitions {
			return nil, apierr.Invalid("partition", "%d outside [0, %d) of topic %q", explicit, t.Partitions, t.Name)
		}
	}
	builders := make(map[int]*record.Builder)
	counts := make(map[int]int64)
	now := s.cfg.Now().UnixMilli()
	for i, r := range recs {
		if sc != nil {
			inv, err := sc.check(ctx, r.GetValue())
			switch {
			case err != nil:
				return nil, err
			case inv == nil:
			case !sc.dlq():
				return nil, sc.refuse(fmt.Sprintf("records[%d].value", i), inv, "")
			default:
				rec := &record.Record{Key: r.GetKey(), Value: r.GetValue(), Timestamp: r.GetTimestamp()}
				if rec.Timestamp == 0 {
					rec.Timestamp = now
				}
				for _, h := range r.GetHeaders() {
					rec.Headers = append(rec.Headers, record.Header{Key: h.GetKey(), Value: h.GetValue()})
				}
				pl.results = append(pl.results, resultRef{dead: sc.deadResult(inv), deadAt: len(dead)})
				dead = append(dead, sc.deadLetter(rec, -1, inv, inv.Error()))
				continue
			}
		}
		var key []byte
		if len(r.GetKey()) > 0 {
			key = r.GetKey()
		}
		p32, err := ct.part.Partition(key, explicit)
		if err != nil {
			return nil, apierr.Invalid(fmt.Sprintf("records[%d]", i), "%v", err)
		}
		p := int(p32)
		b := builders[p]
		if b == nil {
			if b, err = record.NewBuilder(record.BuilderOptions{Limits: lim}); err != nil {
				return nil, connect.NewError(connect.CodeInternal, err)
			}
			builders[p] = b
		}
		rec := &record.Record{Key: key, Value: r.GetValue(), Timestamp: r.GetTimestamp()}
		if rec.Timestamp == 0 {
			rec.Timestamp = now
		}
		if rec.Timestamp < 0 {
			return nil, apierr.Invalid(fmt.Sprintf("records[%d].timestamp", i), "%d is negative", rec.Timestamp)
		}
		for _, h := range r.GetHeaders() {
			rec.Headers = append(rec.Headers, record.Header{Key: h.GetKey(), Value: h.GetValue()})
		}
		// A value over the server's value limit first: no topic config
		// would let it through, so naming max.message.bytes would mislead.
		// Then whether the record fits a batch at all: near the limit,
		// that is the limit the user knows (max.message.bytes).
		if n := len(rec.Value); n > lim.MaxValueBytes {
			return nil, apierr.TooLarge(fmt.Sprintf("records[%d].value", i), apierr.ValueBytes, int64(n), int64(lim.MaxValueBytes))
		}
		if n := record.BatchSize(rec); n > lim.MaxBatchBytes {
			return nil, apierr.TooLarge(fmt.Sprintf("records[%d]", i), batchLimit, int64(n), int64(lim.MaxBatchBytes))
		}
		if err := b.Append(rec); err != nil {
			if errors.Is(err, record.ErrBatchFull) {
				// The request's records for p are one batch, stored
				// together or not at all.
				field := fmt.Sprintf("records for partition %d", p)
				if b.Len() >= lim.MaxRecords {
					return nil, apierr.TooLarge(field, apierr.RecordsPerBatch, -1, int64(lim.MaxRecords))
				}
				return nil, apierr.TooLarge(field, batchLimit, -1, int64(lim.MaxBatchBytes))
			}
			return nil, formatError(fmt.Sprintf("records[%d]", i), err, batchLimit)
		}
		pl.results = append(pl.results, resultRef{partition: p, delta: counts[p]})
		counts[p]++
		pl.bytes += len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			pl.bytes += len(h.Key) + len(h.Value)
		}
	}
	for p, b := range builders {
		data, err := b.Build()
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("build the batch of partition %d: %w", p, err))
		}
		part(p).batches = [][]byte{data}
		ct.part.BatchDone(int32(p))
	}
	return s.withDeadLetters(ctx, pl, dead)
}

// withDeadLetters plans the produce of dead (if any) to pl's topic's
// dead-letter topic, as part of pl.
func (s *Service) withDeadLetters(ctx context.Context, pl *plan, dead []*sluicev1.Record) (*plan, error) {
	if len(dead) == 0 {
		return pl, nil
	}
	d, err := s.prepareDeadLetters(ctx, pl.topic, dead)
	if err != nil {
		return nil, err
	}
	pl.dlq = d
	pl.bytes += d.bytes
	return pl, nil
}

// batchCheckError is checkBatch's error as the answer: a refusal or a
// registry failure as it is, a format error worded by formatError.
func batchCheckError(prefix string, err error, batch apierr.Limit) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return formatError(prefix, err, batch)
}

// formatError turns a record format error of prefix (a request's record,
// "records[3]", or batch, "batches[1].data") into INVALID_ARGUMENT: a limit
// worded from the table of limits (apierr.TooLarge), anything else naming
// the field. batch is the limit in force for the batch size.
func formatError(prefix string, err error, batch apierr.Limit) error {
	var fe *record.FormatError
	if !errors.As(err, &fe) {
		return apierr.Invalid(prefix, "%v", err)
	}
	field := prefix + "." + fe.Field
	if rec, ok := strings.CutPrefix(prefix, "records["); ok && strings.HasPrefix(fe.Field, "records[") {
		// A request's record: the builder numbers it within its
		// partition's batch; name it by its place in the request.
		_, sub, _ := strings.Cut(fe.Field, "].")
		field = "records[" + rec + "." + sub
	}
	if errors.Is(err, record.ErrLimit) {
		var l apierr.Limit
		switch fe.Limit {
		case "MaxBatchBytes":
			l, field = batch, strings.TrimSuffix(prefix, ".data")
		case "MaxRecords":
			l, field = apierr.RecordsPerBatch, strings.TrimSuffix(prefix, ".data")
		case "MaxDecompressedBytes":
			l, field = apierr.DecompressedBatchBytes, strings.TrimSuffix(prefix, ".data")
		case "MaxKeyBytes":
			l = apierr.KeyBytes
		case "MaxValueBytes":
			l = apierr.ValueBytes
		case "MaxHeaders":
			l = apierr.HeadersPerRecord
		case "MaxHeaderKeyBytes":
			l = apierr.HeaderKeyBytes
		case "MaxHeaderValueBytes":
			l = apierr.HeaderValueBytes
		}
		if l.Key != "" {
			return apierr.TooLarge(field, l, int64(fe.Got), int64(fe.Max))
		}
	}
	return apierr.Invalid(field, "%s", fe.Reason)
}

// start routes each partition's batches: enqueued on this copy's writers in
// request order (so pipelined requests keep their order), or forwarded to
// the owner. It does not wait for durability.
func (s *Service) start(ctx context.Context, pl *plan, forwarded bool) {
	for p, pp := range pl.parts {
		r, err := s.routeTo(ctx, pl.topic, p, forwarded)
		if err != nil {
			pp.err = err
			continue
		}
		if r.w != nil {
			for _, b := range pp.batches {
				pend, err := r.w.Enqueue(ctx, b)
				if err != nil {
					pp.err = err
					break
				}
				pp.pending = append(pp.pending, pend)
			}
			continue
		}
		pp.forward = s.forward(ctx, r.forward, pl.topic.Name, p, pp.batches)
	}
	if pl.dlq != nil {
		s.start(ctx, pl.dlq, false)
	}
}

// finish waits for every partition and assembles the answer in request
// order. If any partition failed, the request fails with that error (other
// partitions' records may be stored: a produce is not atomic across
// partitions, as in Kafka).
func (s *Service) finish(ctx context.Context, pl *plan) (*sluicev1.ProduceResponse, error) {
	var firstErr error
	for p, pp := range pl.parts {
		if pp.err == nil && pp.forward != nil {
			select {
			case <-pp.forward.done:
			case <-ctx.Done():
				pp.err = context.Cause(ctx)
			}
			if pp.err == nil {
				pp.err = pp.forward.err
			}
			if pp.forward.err != nil {
				s.forgetRoute(slotKey{pl.topic.ID, p})
			}
			if pp.err == nil && pp.forward.resp.GetTopicId() != string(pl.topic.ID) {
				// The owner wrote to another incarnation of the name than
				// this copy routed by: never acknowledge across
				// incarnations; the retry looks the topic up again.
				pp.err = s.recreated(pl.topic)
			}
			if pp.err == nil {
				res := pp.forward.resp.GetResults()
				if len(res) != len(pp.batches) {
					pp.err = connect.NewError(connect.CodeInternal, fmt.Errorf("owner answered %d results for %d batches", len(res), len(pp.batches)))
				}
				for _, r := range res {
					pp.done = append(pp.done, partition.Appended{BaseOffset: r.GetOffset()})
					pp.dup = append(pp.dup, r.GetDuplicate())
				}
			}
		}
		if pp.err == nil {
			for _, pend := range pp.pending {
				a, err := pend.Wait(ctx)
				if err != nil {
					pp.err = err
					break
				}
				pp.done = append(pp.done, a)
				pp.dup = append(pp.dup, a.Duplicate)
			}
		}
		if pp.err != nil && firstErr == nil {
			firstErr = pp.err
		}
	}
	var dead *sluicev1.ProduceResponse
	if pl.dlq != nil {
		var err error
		if dead, err = s.finish(ctx, pl.dlq); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, s.produceError(firstErr)
	}
	resp := &sluicev1.ProduceResponse{Results: make([]*sluicev1.ProduceResult, len(pl.results)), TopicId: string(pl.topic.ID)}
	for i, r := range pl.results {
		if r.dead != nil {
			d := dead.GetResults()[r.deadAt]
			resp.Results[i] = &sluicev1.ProduceResult{Partition: d.GetPartition(), Offset: d.GetOffset(), DeadLetter: r.dead}
			continue
		}
		pp := pl.parts[r.partition]
		resp.Results[i] = &sluicev1.ProduceResult{
			Partition: int32(r.partition),
			Offset:    pp.done[r.batch].BaseOffset + r.delta,
			Duplicate: pp.dup[r.batch],
		}
	}
	return resp, nil
}

// The google.rpc.ErrorInfo reasons (domain apierr.Domain) of an idempotent
// producer's FAILED_PRECONDITION answers; ProduceStream carries them in
// ProduceError.reason.
const (
	ReasonOutOfOrderSequence = "OUT_OF_ORDER_SEQUENCE"
	ReasonUnknownProducer    = "UNKNOWN_PRODUCER_ID"
	ReasonProducerFenced     = "PRODUCER_FENCED"
)

// produceError maps the write path's errors to codes: the one place ingest
// turns its typed errors (errors.go), the partition writer's and the
// stores' into Connect codes. Connect errors made by the handlers'
// argument checks pass through.
func (s *Service) produceError(err error) error {
	var ce *connect.Error
	var fe *record.FormatError
	var le limitError
	switch {
	case isRetry(err):
		// Before the Connect check: a broken forwarding stream wraps the
		// RPC error that broke it, which is not the answer.
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.As(err, &le):
		return apierr.Exhausted(s.cfg.RetryAfter, err)
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, partition.ErrBusy), errors.Is(err, dedup.ErrTooManyInFlight), errors.Is(err, dedup.ErrTooManyProducers):
		return apierr.Exhausted(s.cfg.RetryAfter, err)
	case errors.Is(err, dedup.ErrProducerFenced):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonProducerFenced, nil)
	case errors.Is(err, dedup.ErrOutOfOrderSequence):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonOutOfOrderSequence, nil)
	case errors.Is(err, dedup.ErrUnknownProducer):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonUnknownProducer, nil)
	case errors.Is(err, dedup.ErrInvalidSequence):
		return apierr.Invalid("batches.data.baseSequence", "%v", err)
	case errors.Is(err, partition.ErrUnavailable), errors.Is(err, partition.ErrFenced), errors.Is(err, partition.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w; retry", err))
	case errors.As(err, &fe):
		return apierr.Invalid(fe.Field, "%s", fe.Reason)
	case errors.Is(err, record.ErrInvalid):
		// Bad input found by the writer: sending it again cannot help.
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierr.FromCatalog(err)
	default:
		return apierr.FromCatalog(err)
	}
}

// ProduceStream pipelines produce requests on one stream: each request is
// validated and enqueued in the order received (so a producer's order holds
// across pipelined requests), and answered in that order once durable. At
// most MaxStreamInFlight requests are unanswered; beyond that the server
// stops reading. A failed request is answered with an error and the stream
// goes on. When the copy shuts down, the stream stops taking requests,
// answers those it took and ends with UNAVAILABLE.
func (s *Service) ProduceStream(ctx context.Context, stream *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	forwarded := stream.RequestHeader().Get(forwardedHeader) != "" && s.trustsForwarding(ctx)
	client, err := quotaKey(ctx, stream.RequestHeader().Get(clientIDHeader), forwarded)
	if err != nil {
		return err
	}
	var ans streamAnswerer
	var recvErr error
	for first := true; ; first = false {
		req, err := stream.Receive()
		if err != nil {
			switch {
			case s.isDraining():
				// Shutdown closed the request body (drain.go): the
				// requests received so far are answered below.
				recvErr = connect.NewError(connect.CodeUnavailable, errors.New("ingest copy shutting down: reconnect and resend the requests not answered"))
			case !errors.Is(err, io.EOF):
				recvErr = err
			}
			break
		}
		if first {
			answer := func(f *inflight) *sluicev1.ProduceStreamResponse { return s.answer(ctx, client, forwarded, f) }
			if req.GetAnyOrder() {
				ans = newUnorderedAnswerer(stream, answer, s.cfg.MaxStreamInFlight)
			} else {
				ans = newOrderedAnswerer(stream, answer, s.cfg.MaxStreamInFlight)
			}
		}
		f := &inflight{id: req.GetCorrelationId(), since: time.Now()}
		rctx, span := s.traceProduce(ctx, req.GetRequest()) // tracing.go; answer ends it
		f.span = span
		if req.GetRequest() == nil {
			f.err = apierr.Invalid("request", "required")
		} else if s.d.Authorize != nil {
			f.err = s.d.Authorize(ctx, req) // answered in the stream, which goes on
		}
		if f.err != nil {
			// answered below
		} else if f.pl, f.err = s.prepare(rctx, req.GetRequest()); f.err == nil {
			if !forwarded {
				f.err = s.checkTxnBatches(rctx, req.GetTransactionalId(), f.pl)
			}
			if f.err != nil {
				f.pl = nil
			} else if f.err = s.admit(rctx, f.pl); f.err == nil {
				s.start(rctx, f.pl, forwarded)
			}
		}
		if !ans.add(ctx, f) {
			endProduceSpan(f.span, context.Cause(ctx))
			s.done(f.pl) // never answered: its bytes go back to the budget
			recvErr = ctx.Err()
			break
		}
	}
	sendErr := error(nil)
	if ans != nil {
		sendErr = ans.close()
	}
	if recvErr != nil {
		return recvErr
	}
	return sendErr
}

// inflight is one received ProduceStream request: its plan (started), or
// why it fails.
type inflight struct {
	id    uint64
	pl    *plan
	err   error
	since time.Time  // when it was received
	span  trace.Span // its append span (tracing.go); nil: not traced
}

// answer waits for f's plan and builds its answer.
func (s *Service) answer(ctx context.Context, client string, forwarded bool, f *inflight) *sluicev1.ProduceStreamResponse {
	out := &sluicev1.ProduceStreamResponse{CorrelationId: f.id}
	err := f.err
	if err == nil {
		out.Response, err = s.finish(ctx, f.pl)
		s.done(f.pl)
	}
	if err == nil {
		s.m.acked(ctx, f.pl, f.since, forwarded)
		err = s.throttle(ctx, client, f.pl, out.Response)
	}
	if err != nil {
		out.Response = nil
		err = s.produceError(err)
		s.m.failed(ctx, forwarded, err)
		out.Error = streamError(err)
	}
	endProduceSpan(f.span, err)
	return out
}

// streamAnswerer answers a ProduceStream's requests, at most max unanswered
// at a time: add waits for room (false when ctx ended first); close waits
// for every answer and returns the first send error.
type streamAnswerer interface {
	add(ctx context.Context, f *inflight) bool
	close() error
}

type answerFunc func(*inflight) *sluicev1.ProduceStreamResponse

type sender interface {
	Send(*sluicev1.ProduceStreamResponse) error
}

// orderedAnswerer answers in the order received: one goroutine, owned by
// the answerer (close waits for it), takes the requests from a queue.
type orderedAnswerer struct {
	queue   chan *inflight
	done    chan struct{}
	sendErr error // written by the goroutine, read after done
}

func newOrderedAnswerer(st sender, answer answerFunc, max int) *orderedAnswerer {
	a := &orderedAnswerer{queue: make(chan *inflight, max), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for f := range a.queue {
			out := answer(f)
			if a.sendErr == nil {
				a.sendErr = st.Send(out)
			}
		}
	}()
	return a
}

func (a *orderedAnswerer) add(ctx context.Context, f *inflight) bool {
	select {
	case a.queue <- f:
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *orderedAnswerer) close() error {
	close(a.queue)
	<-a.done
	return a.sendErr
}

// unorderedAnswerer answers each request as soon as it is done (any_order):
// a goroutine per unanswered request (at most max, owned by the answerer:
// close waits for them), which first waits for the answers of the earlier
// requests of its partitions, so a partition's answers keep their order.
type unorderedAnswerer struct {
	st     sender
	answer answerFunc
	slots  chan struct{}
	wg     sync.WaitGroup
	// last is, per partition, the answered channel of the latest request
	// touching it; used by add only (the receive loop).
	last map[partKey]chan struct{}

	sendMu  sync.Mutex
	sendErr error
}

type partKey struct {
	topic     string
	partition int
}

func newUnorderedAnswerer(st sender, answer answerFunc, max int) *unorderedAnswerer {
	return &unorderedAnswerer{st: st, answer: answer, slots: make(chan struct{}, max), last: map[partKey]chan struct{}{}}
}

func (a *unorderedAnswerer) add(ctx context.Context, f *inflight) bool {
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	answered := make(chan struct{})
	var before []chan struct{}
	if f.pl != nil {
		for p := range f.pl.parts {
			k := partKey{f.pl.topic.Name, p}
			if prev := a.last[k]; prev != nil {
				before = append(before, prev)
			}
			a.last[k] = answered
		}
	}
	if len(a.last) > 4*cap(a.slots) {
		a.forgetAnswered()
	}
	a.wg.Go(func() {
		defer func() { <-a.slots }()
		defer close(answered)
		out := a.answer(f)
		for _, b := range before {
			<-b // never blocks forever: earlier goroutines do not wait for later ones
		}
		a.sendMu.Lock()
		if a.sendErr == nil {
			a.sendErr = a.st.Send(out)
		}
		a.sendMu.Unlock()
	})
	return true
}

// forgetAnswered drops the partitions whose latest request is answered,
// so last stays bounded by the unanswered requests.
func (a *unorderedAnswerer) forgetAnswered() {
	for k, ch := range a.last {
		select {
		case <-ch:
			delete(a.last, k)
		default:
		}
	}
}

func (a *unorderedAnswerer) close() error {
	a.wg.Wait()
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.sendErr
}

func streamError(err error) *sluicev1.ProduceError {
	ce := new(connect.Error)
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeUnknown, err)
	}
	pe := &sluicev1.ProduceError{Code: int32(ce.Code()), Message: ce.Message(), Reason: apierr.Reason(ce)}
	if d, ok := apierr.RetryDelay(ce); ok {
		pe.RetryAfterMs = int32(d.Milliseconds())
	}
	return pe
}
