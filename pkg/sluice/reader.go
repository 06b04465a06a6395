package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Reader reads one partition with Fetch, outside any consumer group: no
// leases, no commits; the application keeps its position (Offset, Seek).
// It has no goroutines. It is safe for concurrent use, but Poll and Next
// calls run one at a time.
type Reader struct {
	client *Client
	cfg    readerConfig
	tp     TopicPartition
	log    *slog.Logger

	// closed ends when Close is called: it cancels a Poll in progress.
	closed context.Context
	close  context.CancelFunc

	pollMu  sync.Mutex       // one Poll/Next at a time; held across the Fetch
	buf     []ConsumedRecord // fetched, not yet returned by Next; guarded by pollMu
	batches *batchDecoder    // guarded by pollMu

	mu sync.Mutex
	// Guarded by mu.
	next     int64    // offset of the next Fetch; -1 while start is pending
	pos      int64    // where reading resumes after what Poll/Next returned (Offset)
	start    Position // the symbolic start of the next Fetch when next < 0
	hw       int64    // high watermark of the last answer; -1 before one
	logStart int64    // log start offset of the last answer; -1 before one
}

// NewReader returns a Reader of one partition, positioned at the StartAt
// option (default Earliest). It validates the options (reporting every one
// out of bounds) and does no I/O.
func (c *Client) NewReader(topic string, partition int32, opts ...ReaderOption) (*Reader, error) {
	cfg, err := newReaderConfig(topic, partition, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{client: c, cfg: cfg, tp: TopicPartition{topic, partition}, log: c.log,
		closed: ctx, close: cancel, hw: -1, logStart: -1}
	r.seek(cfg.start)
	return r, nil
}

// Close makes Poll and Next fail with ErrClosed, a call in progress too. It
// never fails.
func (r *Reader) Close() error {
	r.close()
	return nil
}

// Offset is where reading resumes: one past the last record Poll or Next
// returned (or further, past a compacted gap or a resolved start), or -1
// while a symbolic start (Earliest, Latest, AtTime) has not been resolved
// by a first Fetch.
func (r *Reader) Offset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos
}

// HighWatermark is the partition's end (the offset the next record will
// get) as of the last Fetch, or -1 before one.
func (r *Reader) HighWatermark() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hw
}

// LogStartOffset is the oldest offset still stored as of the last Fetch, or
// -1 before one.
func (r *Reader) LogStartOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logStart
}

// Seek moves the Reader to p; records Next had buffered are dropped. It
// waits for a Poll or Next in progress.
func (r *Reader) Seek(p Position) error {
	if err := p.check(); err != nil {
		return fmt.Errorf("%w: Seek: %w", ErrInvalidOption, err)
	}
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.buf = nil
	r.seek(p)
	return nil
}

func (r *Reader) seek(p Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.kind == posOffset {
		r.next = p.offset
	} else {
		r.next, r.start = -1, p
	}
	r.pos = r.next
}

// Next returns the next record, waiting for one until ctx ends. It returns
// the errors Poll does.
func (r *Reader) Next(ctx context.Context) (ConsumedRecord, error) {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	for len(r.buf) == 0 {
		recs, err := r.fetch(ctx)
		if err != nil {
			return ConsumedRecord{}, err
		}
		r.buf = recs
	}
	rec := r.buf[0]
	r.buf[0] = ConsumedRecord{}
	r.buf = r.buf[1:]
	r.mu.Lock()
	if len(r.buf) == 0 {
		r.pos = r.next
	} else {
		r.pos = rec.Offset + 1
	}
	r.mu.Unlock()
	return rec, nil
}

// Poll returns the next records: what Next had buffered, else one Fetch's
// records. At the end of the partition it waits up to WithFetchMaxWait for
// new records and returns none (and no error) if none came. Retriable
// failures are retried with backoff for up to WithReadRetryTimeout (then
// the error wraps ErrRetriesExhausted and the last failure); an offset
// outside the partition's range is an *OffsetOutOfRangeError (Seek to
// recover); an unknown topic wraps ErrUnknownTopic. The position moves to
// the server's next offset only when records (or a resolved start) come
// back.
func (r *Reader) Poll(ctx context.Context) ([]ConsumedRecord, error) {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	recs := r.buf
	r.buf = nil
	if len(recs) == 0 {
		var err error
		if recs, err = r.fetch(ctx); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	r.pos = r.next
	r.mu.Unlock()
	return recs, nil
}

// fetch runs one Fetch with retries. Called with pollMu held.
func (r *Reader) fetch(ctx context.Context) ([]ConsumedRecord, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.closed, cancel)
	defer stop()
	deadline := time.Now().Add(r.cfg.retryTimeout)
	for attempt := 1; ; attempt++ {
		if r.closed.Err() != nil {
			return nil, ErrClosed
		}
		r.mu.Lock()
		req := &sluicev1.FetchRequest{
			Topic: r.tp.Topic, Partition: r.tp.Partition, Offset: r.next,
			MaxRecords: int32(r.cfg.maxRecords), MaxBytes: int32(r.cfg.maxBytes),
			MaxWaitMs:     int32(r.cfg.maxWait.Milliseconds()),
			RecordBatches: !r.cfg.perRecord,
			ReadCommitted: r.cfg.readCommitted,
		}
		if r.next < 0 {
			req.Start, req.Offset, req.StartTimestampMs = r.start.proto()
		}
		r.mu.Unlock()
		resp, err := r.client.consumer.Fetch(ctx, connect.NewRequest(req))
		if err == nil {
			return r.take(req, resp.Msg)
		}
		if r.closed.Err() != nil {
			return nil, ErrClosed
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sluice: fetch %s: %w", r.tp, context.Cause(ctx))
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			switch ce.Code() {
			case connect.CodeOutOfRange:
				offset := req.Offset
				if req.Start != sluicev1.StartPosition_START_POSITION_UNSPECIFIED {
					offset = -1
				}
				return nil, outOfRange(r.tp, offset, ce)
			case connect.CodeNotFound:
				return nil, fmt.Errorf("%w %q (partition %d): %w", ErrUnknownTopic, r.tp.Topic, r.tp.Partition, err)
			}
		}
		class, delay := classify(err)
		if class != classRetriable {
			return nil, fmt.Errorf("sluice: fetch %s: %w", r.tp, err)
		}
		wait := max(r.cfg.backoff(attempt), delay)
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("%w: fetch %s for %v: %w", ErrRetriesExhausted, r.tp, r.cfg.retryTimeout, err)
		}
		r.log.Debug("sluice: fetch retry", slog.String("partition", r.tp.String()), slog.Int("attempt", attempt),
			slog.Duration("wait", wait), slog.Any("err", err))
		if serr := sleepCtx(ctx, wait); serr != nil {
			if r.closed.Err() != nil {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("sluice: fetch %s: %w (last error: %w)", r.tp, serr, err)
		}
	}
}

// take checks a Fetch answer (offsets in order, at or after the request,
// next offset past them) and moves the position.
func (r *Reader) take(req *sluicev1.FetchRequest, resp *sluicev1.FetchResponse) ([]ConsumedRecord, error) {
	from := int64(-1) // offsets must be at least this
	if req.Start == sluicev1.StartPosition_START_POSITION_UNSPECIFIED {
		from = req.Offset
	}
	if runs := resp.GetRecordBatches(); len(runs) > 0 {
		// Stored batches: the first may start before the offset read.
		if from < 0 {
			from = resp.GetOffset()
		}
		if r.batches == nil {
			r.batches = newBatchDecoder()
		}
		recs, err := r.batches.decode(nil, r.tp, runs, from)
		if err != nil {
			return nil, fmt.Errorf("sluice: fetch %s: the record batches received do not decode: %w", r.tp, err)
		}
		if len(recs) > 0 {
			from = recs[len(recs)-1].Offset + 1
		}
		return r.advance(resp, from, recs)
	}
	recs := make([]ConsumedRecord, 0, len(resp.GetRecords()))
	for _, pr := range resp.GetRecords() {
		if pr.GetOffset() < from {
			return nil, fmt.Errorf("sluice: fetch %s: server answered offset %d, expected at least %d", r.tp, pr.GetOffset(), from)
		}
		from = pr.GetOffset() + 1
		recs = append(recs, consumedRecord(r.tp.Topic, r.tp.Partition, pr))
	}
	return r.advance(resp, from, recs)
}

// advance moves the position past an answer whose records end before from.
func (r *Reader) advance(resp *sluicev1.FetchResponse, from int64, recs []ConsumedRecord) ([]ConsumedRecord, error) {
	next := resp.GetNextOffset()
	if next < from {
		return nil, fmt.Errorf("sluice: fetch %s: server answered next offset %d, expected at least %d", r.tp, next, from)
	}
	r.mu.Lock()
	r.next, r.hw, r.logStart = next, resp.GetHighWatermark(), resp.GetLogStartOffset()
	r.mu.Unlock()
	return recs, nil
}
