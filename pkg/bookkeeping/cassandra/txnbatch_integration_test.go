//go:build integration

package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/bookkeeping/bookkeepingtest"
)

// TestIntegrationCassandraConformanceBuckets runs the bookkeeping suite on
// a keyspace whose transactions table has 7 buckets (the default is 1), so
// that ListTxns pages across buckets and records live in several Cassandra
// partitions.
func TestIntegrationCassandraConformanceBuckets(t *testing.T) {
	cfg := testConfig(t)
	cfg.TxnBuckets = 7
	s := openStore(t, cfg)
	bookkeepingtest.Run(t, bookkeepingtest.HarnessFunc(func(t *testing.T) bookkeepingtest.Store {
		return bookkeepingtest.Store{
			Members: s, Leases: s, Offsets: s, Groups: s, Producers: s, Transactions: s,
			Timing: bookkeepingtest.WallClock(time.Second, 3*time.Second),
		}
	}))
}

// TestIntegrationCassandraTxnRacingWriters: three stores on one keyspace
// (three processes' batchers) and 24 writers read-modify-write six
// transactional ids of one bucket, each write marked with its writer and
// step. Every version of every id is won by exactly one PutTxn, the final
// record is the last winner's, and the batchers did batch (fewer Paxos
// rounds than writes).
func TestIntegrationCassandraTxnRacingWriters(t *testing.T) {
	cfg := testConfig(t)
	stores := []*store{openDriver(t, cfg), openDriver(t, cfg), openDriver(t, cfg)}
	ctx := t.Context()
	ids := []string{"race-a", "race-b", "race-c", "race-d", "race-e", "race-f"}
	for _, id := range ids {
		if _, err := stores[0].InitProducer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		wins = map[string]map[int64]time.Duration{} // id → version → mark
	)
	for _, id := range ids {
		wins[id] = map[int64]time.Duration{}
	}
	const writers, steps = 24, 30
	var wg sync.WaitGroup
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for step := range steps {
				id := ids[rand.IntN(len(ids))]
				cur, err := s.GetTxn(ctx, id)
				if err != nil {
					t.Errorf("GetTxn %s: %v", id, err)
					return
				}
				cur.Timeout = time.Duration(w*1000+step+1) * time.Millisecond
				put, err := s.PutTxn(ctx, cur)
				switch {
				case errors.Is(err, bookkeeping.ErrConflict):
					continue
				case err != nil:
					t.Errorf("PutTxn %s: %v", id, err)
					return
				}
				mu.Lock()
				if prev, ok := wins[id][put.Version]; ok {
					t.Errorf("%s version %d won twice: by marks %v and %v", id, put.Version, prev, cur.Timeout)
				}
				wins[id][put.Version] = cur.Timeout
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for _, id := range ids {
		got, err := stores[1].GetTxn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(wins[id]))
		if got.Version != 1+n { // 1: InitProducer's insert
			t.Errorf("%s at version %d after %d wins, want %d", id, got.Version, n, 1+n)
		}
		if mark, ok := wins[id][got.Version]; n > 0 && (!ok || mark != got.Timeout) {
			t.Errorf("%s: stored mark %v at version %d, the winner of that version wrote %v (won %v)", id, got.Timeout, got.Version, mark, ok)
		}
		total += int(n)
	}
	var rounds, rows int64
	for _, s := range stores {
		rounds += s.batches.rounds.Load()
		rows += s.batches.rows.Load()
	}
	t.Logf("%d wins of %d writes; %d writes in %d rounds", total, writers*steps, rows, rounds)
	if total < len(ids) {
		t.Errorf("only %d writes won", total)
	}
	if rounds >= rows {
		t.Errorf("%d writes in %d rounds: the batchers never batched", rows, rounds)
	}
}

// TestIntegrationCassandraTxnBatchSettles: a batch that Cassandra refuses
// because one of its writes is stale applies none of them; the stale write
// is answered ErrConflict and the other goes again, and applies.
func TestIntegrationCassandraTxnBatchSettles(t *testing.T) {
	s := openDriver(t, testConfig(t))
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := s.InitProducer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.GetTxn(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.GetTxn(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	stale := b
	stale.Version-- // as a coordinator that did not see the last write
	a.Timeout, stale.Timeout = time.Minute, time.Hour
	wa, wb := s.putWrite(a), s.putWrite(stale)
	for _, w := range []*txnWrite{wa, wb} {
		w.ctx, w.done = ctx, make(chan error, 1)
	}
	again := s.batches.exec(s.bucket("a"), []*txnWrite{wa, wb})
	if err := <-wb.done; !errors.Is(err, bookkeeping.ErrConflict) {
		t.Fatalf("the stale write: %v, want ErrConflict", err)
	}
	if len(again) != 1 || again[0] != wa {
		t.Fatalf("writes to go again = %v, want the one that was not stale", again)
	}
	if got, err := s.GetTxn(ctx, "a"); err != nil || got.Version != a.Version {
		t.Fatalf("a refused batch wrote a: %+v, %v", got, err)
	}
	if again := s.batches.exec(s.bucket("a"), again); len(again) != 0 {
		t.Fatalf("the write went again twice: %v", again)
	}
	if err := <-wa.done; err != nil {
		t.Fatalf("the write alone: %v", err)
	}
	if got, err := s.GetTxn(ctx, "a"); err != nil || got.Version != a.Version+1 || got.Timeout != time.Minute {
		t.Fatalf("a after its write = %+v, %v; want version %d, timeout 1m", got, err, a.Version+1)
	}
	if got, err := s.GetTxn(ctx, "b"); err != nil || got.Version != b.Version || got.Timeout == time.Hour {
		t.Fatalf("b after the stale write = %+v, %v; want it unchanged", got, err)
	}
}

// TestIntegrationCassandraMigratesToBuckets: records a v7 binary stored
// move at the migration to v8 into the number of buckets the migrating
// binary is configured with; a binary configured with another number later
// uses the stored one.
func TestIntegrationCassandraMigratesToBuckets(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 7)
	const n = 40
	for i := range n {
		stmt := `INSERT INTO transactional_producers (transactional_id, producer_id, epoch, status, timeout_ms, partitions, groups, bumped_by_coordinator, version, offsets) ` +
			`VALUES (?, ?, 2, 2, 60000, [('t1', 0)], ['g'], false, 5, [])`
		if err := raw.Query(stmt, fmt.Sprintf("old-%02d", i), int64(100+i)).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	cfg.TxnBuckets = 5
	s := openDriver(t, cfg)
	if s.txnBuckets != 5 {
		t.Fatalf("txnBuckets = %d after a migration configured with 5", s.txnBuckets)
	}
	buckets := map[int]int{}
	for i := range n {
		id := fmt.Sprintf("old-%02d", i)
		want := bookkeeping.Txn{TransactionalID: id, ProducerID: int64(100 + i), Epoch: 2, Status: bookkeeping.TxnOngoing, Timeout: time.Minute,
			Partitions: []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 0}}, Groups: []string{"g"}, Version: 5}
		got, err := s.GetTxn(ctx, id)
		if err != nil || !sameTxn(got, want) {
			t.Fatalf("GetTxn(%s) after the move = %+v, %v; want %+v", id, got, err, want)
		}
		buckets[s.bucket(id)]++
	}
	if len(buckets) != 5 {
		t.Fatalf("the %d records went to buckets %v, want all 5 used", n, buckets)
	}
	seen := map[string]bool{}
	for after, more := "", true; more; {
		var page []bookkeeping.Txn
		var err error
		page, more, err = s.ListTxns(ctx, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			if seen[x.TransactionalID] {
				t.Fatalf("ListTxns listed %s twice", x.TransactionalID)
			}
			seen[x.TransactionalID] = true
			after = x.TransactionalID
		}
	}
	if len(seen) != n {
		t.Fatalf("ListTxns listed %d records, want %d", len(seen), n)
	}

	cfg.TxnBuckets = 3
	again := openDriver(t, cfg)
	if again.txnBuckets != 5 {
		t.Fatalf("a binary configured with 3 buckets uses %d, want the stored 5", again.txnBuckets)
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := again.GetTxn(ctx2, "old-07"); err != nil {
		t.Fatal(err)
	}
}
