//go:build integration

package cassandra

import (
	"context"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// recorder records every statement and batch the driver sends.
type recorder struct {
	mu      sync.Mutex
	on      bool
	queries []string
	batches []gocql.ObservedBatch
}

func (r *recorder) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.queries = append(r.queries, q.Statement)
	}
}

func (r *recorder) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.batches = append(r.batches, b)
	}
}

func (r *recorder) record(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.queries, r.batches = on, nil, nil
}

// TestIntegrationCassandraCommitIsOneBatch: a member's commit of 256
// partitions reaches Cassandra as exactly one conditional batch — one Paxos
// round — and nothing else: no reads, no per-partition LWT.
func TestIntegrationCassandraCommitIsOneBatch(t *testing.T) {
	const n = 256
	ctx := t.Context()
	rec := &recorder{}
	cfg := testConfig(t)
	cfg.Configure = func(cc *gocql.ClusterConfig) { cc.QueryObserver, cc.BatchObserver = rec, rec }
	s := openStore(t, cfg)

	if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c := bookkeeping.Commit{Group: "g", Topic: "wide", TopicID: "id", Member: "m"}
	for p := range int32(n) {
		ep, err := s.Acquire(ctx, "g", "wide", p, "m")
		if err != nil {
			t.Fatal(err)
		}
		c.Offsets = append(c.Offsets, bookkeeping.PartitionOffset{Partition: p, Offset: 100, Epoch: ep})
	}

	rec.record(true)
	if err := s.Commit(ctx, c); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	rec.mu.Lock()
	queries, batches := rec.queries, rec.batches
	rec.mu.Unlock()
	rec.record(false)

	if len(queries) != 0 {
		t.Fatalf("Commit sent %d single statements besides the batch: %q", len(queries), queries)
	}
	if len(batches) != 1 {
		t.Fatalf("Commit sent %d batches, want exactly 1", len(batches))
	}
	b := batches[0]
	if len(b.Statements) != n || b.Attempt != 0 || b.Err != nil {
		t.Fatalf("batch: %d statements, attempt %d, err %v; want %d statements, first attempt, no error", len(b.Statements), b.Attempt, b.Err, n)
	}
	for i, stmt := range b.Statements {
		if stmt != fencedCommit {
			t.Fatalf("statement %d is not a fenced conditional update: %s", i, stmt)
		}
		// Every statement is on the one (group, topic) partition key.
		if v := b.Values[i]; v[4] != "g" || v[5] != "wide" {
			t.Fatalf("statement %d is on partition key (%v, %v), want (g, wide)", i, v[4], v[5])
		}
	}
	if sc, ok := b.Batch.GetSerialConsistency(); !ok || sc != gocql.LocalSerial {
		t.Fatalf("batch serial consistency %v (set %v), want LOCAL_SERIAL", sc, ok)
	}
	if b.Batch.GetConsistency() != gocql.LocalQuorum {
		t.Fatalf("batch consistency %v, want LOCAL_QUORUM", b.Batch.GetConsistency())
	}
	if off, err := s.FetchOffset(ctx, "g", "wide", n-1); err != nil || off.Offset != 100 {
		t.Fatalf("FetchOffset after the batch = %+v, %v", off, err)
	}
}

// TestIntegrationCassandraNewIncarnationCommit: the first commit of a
// re-created topic (a new topic id) over higher offsets of the old one is two
// conditional batches — the first, which assumes the same incarnation, fails
// and shows the old id; the second replaces those offsets pinned to what the
// first read — and every later commit is one batch again.
func TestIntegrationCassandraNewIncarnationCommit(t *testing.T) {
	const n = 16
	ctx := t.Context()
	rec := &recorder{}
	cfg := testConfig(t)
	cfg.Configure = func(cc *gocql.ClusterConfig) { cc.QueryObserver, cc.BatchObserver = rec, rec }
	s := openStore(t, cfg)

	if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	commit := func(topicID string, offset int64) bookkeeping.Commit {
		c := bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: topicID, Member: "m"}
		for p := range int32(n) {
			ep, err := s.Acquire(ctx, "g", "orders", p, "m")
			if err != nil {
				t.Fatal(err)
			}
			c.Offsets = append(c.Offsets, bookkeeping.PartitionOffset{Partition: p, Offset: offset, Epoch: ep})
		}
		return c
	}
	if err := s.Commit(ctx, commit("old", 500)); err != nil {
		t.Fatal(err)
	}
	// The new incarnation committed the even partitions already, so the
	// commit meets rows of both incarnations.
	low := commit("new", 10)
	for p := int32(0); p < n; p += 2 {
		one := bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "new", Member: "m",
			Offsets: []bookkeeping.PartitionOffset{{Partition: p, Offset: 5, Epoch: low.Offsets[p].Epoch}}}
		if err := s.Commit(ctx, one); err != nil {
			t.Fatal(err)
		}
	}

	rec.record(true)
	err := s.Commit(ctx, low)
	rec.mu.Lock()
	queries, batches := rec.queries, rec.batches
	rec.mu.Unlock()
	rec.record(false)
	if err != nil {
		t.Fatalf("commit of the new incarnation: %v", err)
	}
	if len(queries) != 0 || len(batches) != 2 {
		t.Fatalf("commit over another incarnation's offsets sent %d statements and %d batches, want 2 batches only", len(queries), len(batches))
	}
	for i, stmt := range batches[1].Statements {
		want := fencedReplace // odd partitions: the old incarnation's 500
		if i%2 == 0 {
			want = fencedCommit // even: the new incarnation's 5
		}
		if stmt != want {
			t.Fatalf("second batch, statement %d: %s, want %s", i, stmt, want)
		}
	}
	for p := range int32(n) {
		if c, err := s.FetchOffset(ctx, "g", "orders", p); err != nil || c.Offset != 10 || c.TopicID != "new" {
			t.Fatalf("FetchOffset(%d) = %+v, %v; want offset 10 of topic id new", p, c, err)
		}
	}

	next := commit("new", 11)
	rec.record(true)
	err = s.Commit(ctx, next)
	rec.mu.Lock()
	batches = rec.batches
	rec.mu.Unlock()
	rec.record(false)
	if err != nil || len(batches) != 1 {
		t.Fatalf("next commit of the new incarnation: %d batches, %v; want 1 batch, applied", len(batches), err)
	}
}
