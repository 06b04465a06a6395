package sluice_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// newTestReader serves fetch and returns a Reader of t/0, closed when the
// test ends.
func newTestReader(t *testing.T, fetch func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error), opts ...sluice.ReaderOption) *sluice.Reader {
	t.Helper()
	g := &groupServer{fetch: fetch}
	c, err := sluice.NewClient(serveConsumer(t, g))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	opts = append([]sluice.ReaderOption{sluice.WithReadBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)
	r, err := c.NewReader("t", 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// compactedLog serves a partition with gaps (offsets divisible by 3 were
// compacted away), three records per Fetch; it records every request.
type compactedLog struct {
	mu   sync.Mutex
	reqs []*sluicev1.FetchRequest
	end  int64
}

func (l *compactedLog) fetch(req *sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	off := req.GetOffset()
	if req.GetStart() == sluicev1.StartPosition_START_POSITION_EARLIEST {
		off = 0
	}
	resp := &sluicev1.FetchResponse{HighWatermark: l.end, LogStartOffset: 0}
	for ; off < l.end && len(resp.Records) < 3; off++ {
		if off%3 == 0 {
			continue
		}
		resp.Records = append(resp.Records, &sluicev1.ConsumedRecord{Offset: off, Value: []byte(strconv.FormatInt(off, 10))})
	}
	resp.NextOffset = off
	return resp, nil
}

// The Reader asks for the server's next offset each time (across the gaps
// of a compacted partition), starting with the symbolic start.
func TestReaderFollowsNextOffset(t *testing.T) {
	l := &compactedLog{end: 20}
	r := newTestReader(t, l.fetch, sluice.WithFetchMaxWait(0))
	ctx := context.Background()
	var got []int64
	for r.Offset() < 20 {
		rec, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Value) != strconv.FormatInt(rec.Offset, 10) || rec.Topic != "t" {
			t.Fatalf("record %+v", rec)
		}
		got = append(got, rec.Offset)
		if r.HighWatermark() != 20 {
			t.Fatalf("high watermark %d", r.HighWatermark())
		}
	}
	want := []int64{1, 2, 4, 5, 7, 8, 10, 11, 13, 14, 16, 17, 19}
	if len(got) != len(want) {
		t.Fatalf("offsets %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offsets %v; want %v", got, want)
		}
	}
	l.mu.Lock()
	if l.reqs[0].GetStart() != sluicev1.StartPosition_START_POSITION_EARLIEST {
		t.Fatalf("first fetch %v; want the symbolic start", l.reqs[0])
	}
	for i := 1; i < len(l.reqs); i++ {
		prev, _ := l.compactedNext(l.reqs[i-1])
		if l.reqs[i].GetStart() != sluicev1.StartPosition_START_POSITION_UNSPECIFIED || l.reqs[i].GetOffset() != prev {
			t.Fatalf("fetch %d asked %v; want offset %d (the previous next_offset)", i, l.reqs[i], prev)
		}
	}
	l.mu.Unlock()
	// Poll at the end returns nothing, and no error.
	if recs, err := r.Poll(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("Poll at the end: %v, %v", recs, err)
	}
}

// compactedNext recomputes the next offset the log answered req with.
func (l *compactedLog) compactedNext(req *sluicev1.FetchRequest) (int64, int) {
	off := req.GetOffset()
	if req.GetStart() == sluicev1.StartPosition_START_POSITION_EARLIEST {
		off = 0
	}
	n := 0
	for ; off < l.end && n < 3; off++ {
		if off%3 != 0 {
			n++
		}
	}
	return off, n
}

// UNAVAILABLE and RESOURCE_EXHAUSTED are retried with backoff (the
// server's RetryInfo delay when longer); the offset stays.
func TestReaderRetries(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var times []time.Time
	r := newTestReader(t, func(req *sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		times = append(times, time.Now())
		switch calls {
		case 1, 2:
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("bookies unreachable"))
		case 3:
			ce := connect.NewError(connect.CodeResourceExhausted, errors.New("read budget in use"))
			d, _ := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(100 * time.Millisecond)})
			ce.AddDetail(d)
			return nil, ce
		}
		if req.GetOffset() != 7 {
			t.Errorf("retry asked offset %d; want 7", req.GetOffset())
		}
		return &sluicev1.FetchResponse{Records: []*sluicev1.ConsumedRecord{{Offset: 7}}, NextOffset: 8, HighWatermark: 8}, nil
	}, sluice.StartAt(sluice.AtOffset(7)))
	recs, err := r.Poll(context.Background())
	if err != nil || len(recs) != 1 || recs[0].Offset != 7 || r.Offset() != 8 {
		t.Fatalf("Poll: %v, %v (offset %d)", recs, err, r.Offset())
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 4 {
		t.Fatalf("%d calls; want 4", calls)
	}
	if d := times[3].Sub(times[2]); d < 100*time.Millisecond {
		t.Fatalf("retried after %v; the server asked for 100ms", d)
	}
}

// Retrying is bounded by WithReadRetryTimeout; the error wraps
// ErrRetriesExhausted and the last failure.
func TestReaderRetryTimeout(t *testing.T) {
	r := newTestReader(t, func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}, sluice.WithReadRetryTimeout(50*time.Millisecond))
	start := time.Now()
	_, err := r.Poll(context.Background())
	if !errors.Is(err, sluice.ErrRetriesExhausted) || connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Poll: %v; want ErrRetriesExhausted wrapping UNAVAILABLE", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
	// Errors that retrying cannot fix return at once.
	r2 := newTestReader(t, func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no topic t"))
	})
	if _, err := r2.Poll(context.Background()); !errors.Is(err, sluice.ErrUnknownTopic) {
		t.Fatalf("Poll: %v; want ErrUnknownTopic", err)
	}
}

// OUT_OF_RANGE is an *OffsetOutOfRangeError with the range from the
// ErrorInfo detail when there is one; -1 when not.
func TestReaderOutOfRange(t *testing.T) {
	withInfo := true
	r := newTestReader(t, func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
		ce := connect.NewError(connect.CodeOutOfRange, errors.New("offset 3 is outside [10, 20]"))
		if withInfo {
			d, _ := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: "OFFSET_OUT_OF_RANGE", Domain: "sluice.dev",
				Metadata: map[string]string{"log_start_offset": "10", "high_watermark": "20"}})
			ce.AddDetail(d)
		}
		return nil, ce
	}, sluice.StartAt(sluice.AtOffset(3)))
	_, err := r.Poll(context.Background())
	var oe *sluice.OffsetOutOfRangeError
	if !errors.Is(err, sluice.ErrOffsetOutOfRange) || !errors.As(err, &oe) {
		t.Fatalf("Poll: %v; want an OffsetOutOfRangeError", err)
	}
	if oe.Offset != 3 || oe.LogStartOffset != 10 || oe.HighWatermark != 20 || oe.Topic != "t" {
		t.Fatalf("%+v", oe)
	}
	withInfo = false
	_, err = r.Poll(context.Background())
	if !errors.As(err, &oe) || oe.LogStartOffset != -1 || oe.HighWatermark != -1 {
		t.Fatalf("without ErrorInfo: %v", err)
	}
	if err := r.Seek(sluice.AtOffset(10)); err != nil || r.Offset() != 10 {
		t.Fatalf("Seek: %v, offset %d", err, r.Offset())
	}
}

// Close ends a Poll waiting at the end of the partition.
func TestReaderCloseEndsPoll(t *testing.T) {
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	defer close(block)
	r := newTestReader(t, func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
		entered <- struct{}{}
		<-block
		return &sluicev1.FetchResponse{}, nil
	})
	done := make(chan error, 1)
	go func() { _, err := r.Poll(context.Background()); done <- err }()
	<-entered
	_ = r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, sluice.ErrClosed) {
			t.Fatalf("Poll: %v; want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Poll")
	}
}
