package ingest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// sendLog records the correlation ids answered, in order.
type sendLog struct {
	mu  sync.Mutex
	ids []uint64
}

func (s *sendLog) Send(r *sluicev1.ProduceStreamResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, r.GetCorrelationId())
	return nil
}

func (s *sendLog) sent() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

func planFor(partitions ...int) *plan {
	pl := &plan{topic: catalog.Topic{Name: "t"}, parts: map[int]*partPlan{}}
	for _, p := range partitions {
		pl.parts[p] = &partPlan{}
	}
	return pl
}

// With any_order, a request that is slow to become durable holds back
// only the later requests of its own partition; with the default, every
// later request.
func TestStreamAnswerers(t *testing.T) {
	release := make(chan struct{})
	answer := func(f *inflight) *sluicev1.ProduceStreamResponse {
		if f.id == 1 {
			<-release // request 1 (partition 0) waits for its bookies
		}
		return &sluicev1.ProduceStreamResponse{CorrelationId: f.id}
	}
	reqs := []*inflight{
		{id: 1, pl: planFor(0)},
		{id: 2, pl: planFor(1)},
		{id: 3, pl: planFor(0)}, // after 1: same partition
		{id: 4},                 // failed before it started: no partition
		{id: 5, pl: planFor(1, 0)},
		{id: 6, pl: planFor(2)},
	}
	ctx := context.Background()

	var un sendLog
	a := newUnorderedAnswerer(&un, answer, 8)
	for _, f := range reqs {
		if !a.add(ctx, f) {
			t.Fatal("add refused")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(un.sent()) < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // nothing else may be answered yet
	if got := un.sent(); len(got) != 3 || !sameSet(got, []uint64{2, 4, 6}) {
		t.Fatalf("any order, request 1 pending: answered %v; want 2, 4 and 6", got)
	}
	close(release)
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if got := un.sent(); !slices.Equal(got[3:], []uint64{1, 3, 5}) {
		t.Fatalf("any order: answered %v; want 1, 3, 5 last, in that order", got)
	}

	release = make(chan struct{})
	var ord sendLog
	o := newOrderedAnswerer(&ord, answer, 8)
	for _, f := range reqs {
		o.add(ctx, f)
	}
	time.Sleep(20 * time.Millisecond)
	if got := ord.sent(); len(got) != 0 {
		t.Fatalf("in order, request 1 pending: answered %v", got)
	}
	close(release)
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	if got := ord.sent(); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("in order: answered %v", got)
	}

	// At most max unanswered: a full answerer refuses once ctx ends.
	release = make(chan struct{})
	full := newUnorderedAnswerer(&sendLog{}, answer, 1)
	full.add(ctx, &inflight{id: 1, pl: planFor(0)})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if full.add(cctx, &inflight{id: 2, pl: planFor(1)}) {
		t.Fatal("a second request was taken beyond max_in_flight 1")
	}
	close(release)
	if err := full.close(); err != nil {
		t.Fatal(err)
	}
}

func sameSet(a, b []uint64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
