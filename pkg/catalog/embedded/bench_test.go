package embedded

// Benchmarks of the catalog's hot metadata calls on the embedded backend,
// on a real directory (b.TempDir) with every write synced, as `sluice dev`
// runs it:
//
//	go test -run '^$' -bench BenchmarkEmbedded -benchtime 3s ./pkg/catalog/embedded/
//
// They are the twins of the DynamoDB benchmarks
// (pkg/catalog/dynamodb/bench_integration_test.go, BenchmarkIntegrationDynamoDB…):
// the same calls, fixtures and case names, so the two tables line up; keep
// them in step. This side runs the cases moto is too slow or too serial
// for: moves and roll-overs with 16 clients, Get/List at chain=1008, and
// 16 clients racing on one ledger. Results and their reading:
// bench/results/2026-11-30-metadata/catalog.md.
//
// Every write takes the catalog's one lock and ends in an fsync, so writes
// do not get faster with more clients; reads share the lock. Each benchmark
// opens its own catalog; fixtures are built once per catalog, outside the
// timer, and reused by b.N's ramp-up runs. chain=N is the number of ledgers
// in a partition's chain (see the DynamoDB file); chain=1008 is a partition
// at steady state with the default retention (7 days) and a roll-over
// every 10 minutes.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/catalogtest"
)

const (
	// liveTTL keeps the owners and bookies of a benchmark live for the
	// whole run.
	liveTTL = catalog.MaxHeartbeatTTL
	// takeoverTTL is the heartbeat TTL in the takeover benchmark, whose
	// clock jumps past it to expire an owner.
	takeoverTTL = 10 * time.Second
	// retainedChain is 7 days (the default retention) of 10-minute ledgers.
	retainedChain = 1008
	// Pre-filled chains use fake ledger ids from fakeIDBase; the ledger id
	// counter starts at counterStart, above them, so real ledgers follow.
	// Ids and offsets have production-like magnitudes.
	fakeIDBase   = 100_000_000
	counterStart = 200_000_000
	offsetBase   = 10_000_000_000
	// bigTopicPartitions is the partition count of the Get/List benchmarks.
	bigTopicPartitions = 1000
)

// benchChains are the chain lengths the partition benchmarks run with.
var benchChains = []int{1, retainedChain}

var (
	bookiesA = []string{"bookie-1:3181", "bookie-2:3181", "bookie-3:3181"}
	bookiesB = []string{"bookie-4:3181", "bookie-5:3181", "bookie-6:3181"}
)

// BenchmarkEmbeddedOwnerHeartbeat: an ingest copy renewing its heartbeat
// record. Client i is owner i.
func BenchmarkEmbeddedOwnerHeartbeat(b *testing.B) {
	ctx := b.Context()
	c := openBench(b, catalog.SystemClock{})
	for i := range 16 {
		if _, err := c.HeartbeatOwner(ctx, ownerID("ingest", i), ownerAddr(i), liveTTL); err != nil {
			b.Fatal(err)
		}
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(bc *benchClient) error {
				_, err := c.HeartbeatOwner(ctx, ownerID("ingest", bc.ID), ownerAddr(bc.ID), liveTTL)
				return err
			})
		})
	}
}

// BenchmarkEmbeddedBookieHeartbeat: a bookie renewing its registry record
// with its disk use. Client i is bookie i.
func BenchmarkEmbeddedBookieHeartbeat(b *testing.B) {
	ctx := b.Context()
	c := openBench(b, catalog.SystemClock{})
	bookie := func(i int, free int64) catalog.Bookie {
		return catalog.Bookie{ID: fmt.Sprintf("bookie-%02d", i), Address: fmt.Sprintf("10.0.1.%d:3181", i+1),
			FreeBytes: free, TotalBytes: 4 << 40}
	}
	for i := range 16 {
		if _, err := c.HeartbeatBookie(ctx, bookie(i, 2<<40), liveTTL); err != nil {
			b.Fatal(err)
		}
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(bc *benchClient) error {
				_, err := c.HeartbeatBookie(ctx, bookie(bc.ID, 2<<40-bc.Rand.Int64N(1<<30)), liveTTL)
				return err
			})
		})
	}
}

// BenchmarkEmbeddedWriterMove: a partition's writer changing; see
// BenchmarkIntegrationDynamoDBWriterMove. handover runs with 1 and 16
// clients. takeover runs with 1: it moves the catalog's one clock past the
// holder's TTL, which would expire every other client's owners too.
func BenchmarkEmbeddedWriterMove(b *testing.B) {
	ctx := b.Context()
	for _, chain := range benchChains {
		c := openBench(b, catalog.SystemClock{})
		createTopic(b, c, "handover", 16)
		hand := make([]*mover, 16)
		for i := range hand {
			hand[i] = setupMover(b, c, "handover", i, liveTTL, chain)
		}
		clock := catalogtest.NewClock(time.Now())
		tc := openBench(b, clock)
		createTopic(b, tc, "takeover", 1)
		take := setupMover(b, tc, "takeover", 0, takeoverTTL, chain)

		for _, cl := range benchClients {
			b.Run(fmt.Sprintf("handover/chain=%d/clients=%d", chain, cl), func(b *testing.B) {
				runClients(b, cl, func(bc *benchClient) error {
					m := hand[bc.ID]
					if err := bc.Time("release", func() error { return c.ReleaseWriter(ctx, m.lease) }); err != nil {
						return err
					}
					return m.acquire(ctx, c, bc)
				})
			})
		}
		b.Run(fmt.Sprintf("takeover/chain=%d/clients=1", chain), func(b *testing.B) {
			runClients(b, 1, func(bc *benchClient) error {
				clock.Advance(takeoverTTL + time.Millisecond) // the holder's heartbeat expires
				next := take.owners[1-take.holder]
				err := bc.Time("hb", func() error {
					_, err := tc.HeartbeatOwner(ctx, next, "10.0.0.1:7420", takeoverTTL)
					return err
				})
				if err != nil {
					return err
				}
				return take.acquire(ctx, tc, bc)
			})
		})
	}
}

// mover is one partition moved back and forth between two owners.
type mover struct {
	topic  string
	owners [2]string
	holder int
	lease  catalog.WriterLease
}

// acquire moves the partition to the owner not holding it.
func (m *mover) acquire(ctx context.Context, c *store, bc *benchClient) error {
	var p catalog.Partition
	err := bc.Time("acq", func() (err error) {
		p, err = c.AcquireWriter(ctx, m.topic, m.lease.Partition, m.owners[1-m.holder])
		return err
	})
	if err != nil {
		return err
	}
	if p.Epoch != m.lease.Epoch+1 {
		return fmt.Errorf("acquire: epoch %d after %d, want +1", p.Epoch, m.lease.Epoch)
	}
	m.holder, m.lease = 1-m.holder, p.Lease()
	return nil
}

// setupMover heartbeats two owners of partition i of topic and gives it to
// the first, with a chain of chain (fake) ledgers.
func setupMover(b *testing.B, c *store, topic string, i int, ttl time.Duration, chain int) *mover {
	b.Helper()
	ctx := b.Context()
	m := &mover{topic: topic, owners: [2]string{ownerID(topic+"-a", i), ownerID(topic+"-b", i)}}
	for _, o := range m.owners {
		if _, err := c.HeartbeatOwner(ctx, o, "10.0.0.1:7420", ttl); err != nil {
			b.Fatal(err)
		}
	}
	p, err := c.AcquireWriter(ctx, topic, i, m.owners[0])
	if err != nil {
		b.Fatal(err)
	}
	prependChain(b, c, p, chain)
	m.lease = p.Lease()
	return m
}

// BenchmarkEmbeddedRollOver: one ledger roll-over of a partition by its
// writer (close, create, append) and the retention trim that keeps the
// chain at its length; see BenchmarkIntegrationDynamoDBRollOver.
func BenchmarkEmbeddedRollOver(b *testing.B) {
	ctx := b.Context()
	for _, chain := range benchChains {
		c := openBench(b, catalog.SystemClock{})
		createTopic(b, c, "roll", 16)
		ws := make([]*writer, 16)
		for i := range ws {
			owner := ownerID("ingest", i)
			if _, err := c.HeartbeatOwner(ctx, owner, ownerAddr(i), liveTTL); err != nil {
				b.Fatal(err)
			}
			ws[i] = setupWriter(b, c, "roll", i, owner, chain)
		}
		for _, cl := range benchClients {
			b.Run(fmt.Sprintf("chain=%d/clients=%d", chain, cl), func(b *testing.B) {
				runClients(b, cl, func(bc *benchClient) error { return ws[bc.ID].roll(ctx, c, bc) })
			})
		}
	}
}

// writer is a partition's writer: its lease, its OPEN tail ledger, and the
// partition as last written.
type writer struct {
	lease catalog.WriterLease
	tail  catalog.LedgerMetadata
	part  catalog.Partition
	chain int // ledgers kept: the trim after each append keeps the chain at this length
}

func (w *writer) roll(ctx context.Context, c *store, bc *benchClient) error {
	closed := w.tail
	closed.State = catalog.LedgerClosed
	closed.LastEntry = 99
	closed.LastOffset = closed.FirstOffset + 999
	if err := bc.Time("close", func() error { _, err := c.UpdateLedger(ctx, closed); return err }); err != nil {
		return err
	}
	var next catalog.LedgerMetadata
	err := bc.Time("create", func() (err error) {
		next, err = c.CreateLedger(ctx, ledgerSpec(w.lease, closed.LastOffset+1))
		return err
	})
	if err != nil {
		return err
	}
	err = bc.Time("append", func() (err error) {
		w.part, err = c.AppendLedger(ctx, w.lease, catalog.LedgerRef{ID: next.ID, FirstOffset: next.FirstOffset})
		return err
	})
	if err != nil {
		return err
	}
	w.tail = next
	if excess := len(w.part.Ledgers) - w.chain; excess > 0 {
		through := w.part.Ledgers[excess-1].ID
		return bc.Time("trim", func() (err error) {
			w.part, err = c.TrimLedgers(ctx, w.lease.TopicID, w.lease.Partition, through, w.part.Version)
			return err
		})
	}
	return nil
}

// setupWriter makes owner the writer of partition i of topic, with an OPEN
// tail ledger at the end of a chain of chain ledgers (the others fake).
func setupWriter(b *testing.B, c *store, topic string, i int, owner string, chain int) *writer {
	b.Helper()
	ctx := b.Context()
	p, err := c.AcquireWriter(ctx, topic, i, owner)
	if err != nil {
		b.Fatal(err)
	}
	w := &writer{lease: p.Lease(), chain: chain}
	if w.tail, err = c.CreateLedger(ctx, ledgerSpec(w.lease, offsetBase)); err != nil {
		b.Fatal(err)
	}
	if p, err = c.AppendLedger(ctx, w.lease, catalog.LedgerRef{ID: w.tail.ID, FirstOffset: w.tail.FirstOffset}); err != nil {
		b.Fatal(err)
	}
	w.part = prependChain(b, c, p, chain-1)
	return w
}

// BenchmarkEmbeddedUpdateLedger: a compare-and-set of a ledger's metadata
// without a state change (an ensemble change); one-ledger: 16 clients
// racing on one ledger. See BenchmarkIntegrationDynamoDBUpdateLedger.
func BenchmarkEmbeddedUpdateLedger(b *testing.B) {
	ctx := b.Context()
	c := openBench(b, catalog.SystemClock{})
	t := createTopic(b, c, "ledgers", 17)
	ls := make([]catalog.LedgerMetadata, 17)
	for i := range ls {
		lease := catalog.WriterLease{Topic: t.Name, TopicID: t.ID, Partition: i, Owner: "ingest-00", Epoch: 1}
		var err error
		if ls[i], err = c.CreateLedger(ctx, ledgerSpec(lease, offsetBase)); err != nil {
			b.Fatal(err)
		}
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(bc *benchClient) error {
				var err error
				ls[bc.ID], err = c.UpdateLedger(ctx, withBookies(ls[bc.ID], bc.Rand.IntN(2)))
				return err
			})
		})
	}
	shared := ls[16].ID
	b.Run("one-ledger/clients=16", func(b *testing.B) {
		runClients(b, 16, func(bc *benchClient) error {
			for {
				m, err := c.GetLedger(ctx, shared)
				if err != nil {
					return err
				}
				_, err = c.UpdateLedger(ctx, withBookies(m, bc.Rand.IntN(2)))
				if !errors.Is(err, catalog.ErrVersionConflict) {
					return err
				}
				bc.Count("conflicts")
			}
		})
	})
}

// withBookies returns m with its last ensemble segment replaced by bookie
// set 0 or 1.
func withBookies(m catalog.LedgerMetadata, set int) catalog.LedgerMetadata {
	bookies := bookiesA
	if set == 1 {
		bookies = bookiesB
	}
	last := len(m.Ensembles) - 1
	m.Ensembles = append(m.Ensembles[:last:last], catalog.EnsembleSegment{FirstEntry: m.Ensembles[last].FirstEntry, Bookies: bookies})
	return m
}

// BenchmarkEmbeddedGetPartition: reading one partition (random index) of a
// 1,000-partition topic whose partitions all have an owner and a chain of
// chain ledgers.
func BenchmarkEmbeddedGetPartition(b *testing.B) {
	ctx := b.Context()
	for _, chain := range benchChains {
		c := openBench(b, catalog.SystemClock{})
		bigTopic(b, c, chain)
		for _, clients := range benchClients {
			b.Run(fmt.Sprintf("partitions=%d/chain=%d/clients=%d", bigTopicPartitions, chain, clients), func(b *testing.B) {
				runClients(b, clients, func(bc *benchClient) error {
					p, err := c.GetPartition(ctx, "big", bc.Rand.IntN(bigTopicPartitions))
					if err == nil && len(p.Ledgers) != chain {
						err = fmt.Errorf("partition %d has %d ledgers, want %d", p.Index, len(p.Ledgers), chain)
					}
					return err
				})
			})
		}
	}
}

// BenchmarkEmbeddedListPartitions: listing all partitions of a
// 1,000-partition topic in one call (limit 1000). partitions/s = ops/s ×
// 1000.
func BenchmarkEmbeddedListPartitions(b *testing.B) {
	ctx := b.Context()
	for _, chain := range benchChains {
		c := openBench(b, catalog.SystemClock{})
		bigTopic(b, c, chain)
		cat := catalog.New(c) // ListPartitions is the catalog's, over the driver's ListPartitionRange
		b.Run(fmt.Sprintf("partitions=%d/chain=%d/clients=1", bigTopicPartitions, chain), func(b *testing.B) {
			ops := runClients(b, 1, func(*benchClient) error {
				page, err := cat.ListPartitions(ctx, "big", "", bigTopicPartitions)
				if err == nil && (len(page.Items) != bigTopicPartitions || page.NextPageToken != "" || len(page.Items[999].Ledgers) != chain) {
					err = fmt.Errorf("listed %d partitions, next token %q", len(page.Items), page.NextPageToken)
				}
				return err
			})
			b.ReportMetric(ops*bigTopicPartitions, "partitions/s")
		})
	}
}

// openBench opens a catalog in a fresh directory, closed when b ends, with
// the ledger id counter at counterStart. It is the driver, not the
// *catalog.Catalog callers get, because the set-up writes records directly;
// the argument checks it skips cost nothing next to a synced write.
func openBench(b *testing.B, clock catalog.Clock) *store {
	b.Helper()
	c, err := open(b.TempDir(), Options{Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	err = c.write(func() error {
		bt := c.db.NewBatch()
		set(bt, ledgerCounterKey, counterRec{Last: counterStart})
		return c.commit(bt)
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// prependChain puts k fake ledgers in front of p's chain (writing the
// partition record directly) and returns the partition as stored.
func prependChain(b *testing.B, c *store, p catalog.Partition, k int) catalog.Partition {
	b.Helper()
	if k <= 0 {
		return p
	}
	p.Ledgers = append(fakeChain(k), p.Ledgers...)
	p.LogStartOffset = p.Ledgers[0].FirstOffset
	p.Version++
	if err := c.write(func() error { return c.putPartition(p) }); err != nil {
		b.Fatalf("prepend chain: %v", err)
	}
	return p
}

// bigTopic creates topic "big" with bigTopicPartitions partitions, each
// owned (by one of 20 owners) with a chain of chain fake ledgers, written
// directly in one batch.
func bigTopic(b *testing.B, c *store, chain int) {
	b.Helper()
	t := createTopic(b, c, "big", bigTopicPartitions)
	err := c.write(func() error {
		bt := c.db.NewBatch()
		for i := range bigTopicPartitions {
			ledgers := fakeChain(chain)
			p := catalog.Partition{Topic: t.Name, TopicID: t.ID, Index: i, Owner: ownerID("ingest", i%20), Epoch: 1,
				Ledgers: ledgers, LogStartOffset: ledgers[0].FirstOffset, Version: 1}
			set(bt, partitionKey(t.ID, i), toPartitionRec(p))
		}
		return c.commit(bt)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// fakeChain is k ledger refs that end just before offsetBase, with ids
// below counterStart.
func fakeChain(k int) []catalog.LedgerRef {
	refs := make([]catalog.LedgerRef, k)
	for i := range refs {
		refs[i] = catalog.LedgerRef{ID: catalog.LedgerID(fakeIDBase + i), FirstOffset: offsetBase - int64(k-i)*1_000_000}
	}
	return refs
}

func createTopic(b *testing.B, c *store, name string, partitions int) catalog.Topic {
	b.Helper()
	t, err := c.CreateTopic(b.Context(), name, partitions, catalog.DefaultTopicConfig())
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func ledgerSpec(l catalog.WriterLease, firstOffset int64) catalog.LedgerSpec {
	return catalog.LedgerSpec{Topic: l.Topic, TopicID: l.TopicID, Partition: l.Partition, Replication: catalog.DefaultReplication,
		Ensemble: bookiesA, FirstOffset: firstOffset, WriterOwner: l.Owner, WriterEpoch: l.Epoch}
}

func ownerID(prefix string, i int) string { return fmt.Sprintf("%s-%02d", prefix, i) }
func ownerAddr(i int) string              { return fmt.Sprintf("10.0.0.%d:7420", i+1) }
