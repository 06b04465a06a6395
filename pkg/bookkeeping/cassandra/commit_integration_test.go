//go:build integration

package cassandra

import (
	"context"
	"strings"
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
	c := bookkeeping.Commit{Group: "g", Topic: "wide", Member: "m"}
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
		if !strings.Contains(stmt, "IF owner = ? AND epoch = ? AND committed_offset <= ?") {
			t.Fatalf("statement %d is not a fenced conditional update: %s", i, stmt)
		}
		// Every statement is on the one (group, topic) partition key.
		if v := b.Values[i]; v[3] != "g" || v[4] != "wide" {
			t.Fatalf("statement %d is on partition key (%v, %v), want (g, wide)", i, v[3], v[4])
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
