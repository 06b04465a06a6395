//go:build integration

package dynamodb

// Benchmarks of the catalog's hot metadata calls on the DynamoDB backend:
// the per-call budget DESIGN.md §2.5 asks for. Run them against moto
// (SLUICE_TEST_AWS_ENDPOINT, see `localstack/stack.sh env moto`):
//
//	go test -tags integration -run '^$' -bench BenchmarkIntegrationDynamoDB -benchtime 3s ./pkg/catalog/dynamodb/
//
// moto is driven as the integration tests drive it: every request goes
// through serialHTTP (one at a time), because moto's DynamoDB is not safe
// under concurrent requests. With 16 clients the calls therefore queue for
// moto; that measures moto, not DynamoDB. What does carry over to DynamoDB
// is what the meter counts: requests, and the read and write capacity units
// each call would consume (see meter in benchrun_integration_test.go).
//
// The pkg/catalog/embedded benchmarks (BenchmarkEmbedded…) run the same
// calls on the embedded backend; keep the two files in step. Results and
// their reading: bench/results/2026-11-30-metadata/catalog.md.
//
// Each benchmark uses its own fresh table, deleted at the end. Fixtures are
// built once per table, outside the timer, and reused by b.N's ramp-up
// runs. chain=N is the number of ledgers in a partition's chain: the
// partition item is rewritten by every ownership move and every roll-over,
// so its size (about 22 bytes per ledger) decides their write cost.
// chain=1008 is a partition at steady state with the default retention
// (7 days) and a roll-over every 10 minutes.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/catalogtest"
)

const (
	// liveTTL keeps the owners and bookies of a benchmark live for the
	// whole run.
	liveTTL = catalog.MaxHeartbeatTTL
	// takeoverTTL is the heartbeat TTL in the takeover benchmark, whose
	// clocks jump past it to expire an owner.
	takeoverTTL = 10 * time.Second
	// retainedChain is 7 days (the default retention) of 10-minute ledgers.
	retainedChain = 1008
	// Pre-filled chains use fake ledger ids from fakeIDBase; the ledger id
	// counter starts at counterStart, above them, so real ledgers follow.
	// Ids and offsets have production-like magnitudes (9 and 11 digits):
	// their length is part of the item size.
	fakeIDBase   = 100_000_000
	counterStart = 200_000_000
	offsetBase   = 10_000_000_000
	// bigTopicPartitions is the partition count of the Get/List benchmarks.
	bigTopicPartitions = 1000
)

// listChains are the chain lengths of the Get/List benchmarks.
var listChains = []int{1}

// serialClients are the client counts of the multi-request calls (moves,
// roll-overs). On moto, 16 clients only queue at serialHTTP: the single
// calls (heartbeats, UpdateLedger, GetPartition) show that once; the
// embedded benchmarks run these with 16 clients too.
var serialClients = []int{1}

var (
	bookiesA = []string{"bookie-1:3181", "bookie-2:3181", "bookie-3:3181"}
	bookiesB = []string{"bookie-4:3181", "bookie-5:3181", "bookie-6:3181"}
)

// BenchmarkIntegrationDynamoDBOwnerHeartbeat: an ingest copy renewing its
// heartbeat record (one conditional put). Client i is owner i.
func BenchmarkIntegrationDynamoDBOwnerHeartbeat(b *testing.B) {
	ctx := b.Context()
	e := newBenchEnv(b)
	c := e.catalog(b, catalog.SystemClock{})
	for i := range 16 {
		if _, err := c.HeartbeatOwner(ctx, ownerID("ingest", i), ownerAddr(i), liveTTL); err != nil {
			b.Fatal(err)
		}
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, e.meter, func(bc *benchClient) error {
				_, err := c.HeartbeatOwner(ctx, ownerID("ingest", bc.ID), ownerAddr(bc.ID), liveTTL)
				return err
			})
		})
	}
}

// BenchmarkIntegrationDynamoDBBookieHeartbeat: a bookie renewing its
// registry record with its disk use (one conditional put). Client i is
// bookie i.
func BenchmarkIntegrationDynamoDBBookieHeartbeat(b *testing.B) {
	ctx := b.Context()
	e := newBenchEnv(b)
	c := e.catalog(b, catalog.SystemClock{})
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
			runClients(b, clients, e.meter, func(bc *benchClient) error {
				_, err := c.HeartbeatBookie(ctx, bookie(bc.ID, 2<<40-bc.Rand.Int64N(1<<30)), liveTTL)
				return err
			})
		})
	}
}

// BenchmarkIntegrationDynamoDBWriterMove: a partition's writer changing.
//
// handover: the graceful move (rebalance, shutdown) — the holder calls
// ReleaseWriter, the other owner AcquireWriter. Both owners are live.
//
// takeover: failover — the holder's heartbeat has expired and the other
// owner takes the partition: AcquireWriter's steal path (one more read and
// one more condition in its transaction). Each client has its own Catalog
// with its own manual clock, as each ingest copy has its own process; a
// call advances that clock past the holder's TTL, renews the taker's
// heartbeat (hb-*; an ingest copy sends it anyway) and acquires (acq-*).
//
// Each client moves its own partition back and forth between its own two
// owners; ops/s counts whole moves, acq-p50-ms/acq-p99-ms the AcquireWriter
// alone.
func BenchmarkIntegrationDynamoDBWriterMove(b *testing.B) {
	ctx := b.Context()
	for _, chain := range []int{1, retainedChain} {
		clients := serialClients
		n := clients[len(clients)-1]
		e := newBenchEnv(b)
		c := e.catalog(b, catalog.SystemClock{})
		createTopic(b, c, "handover", n)
		createTopic(b, c, "takeover", n)

		hand := make([]*mover, n)
		for i := range hand {
			hand[i] = setupMover(b, e, c, "handover", i, liveTTL, chain)
		}
		take := make([]*mover, n)
		takeCats := make([]*store, n)
		clocks := make([]*catalogtest.Clock, n)
		for i := range take {
			clocks[i] = catalogtest.NewClock(time.Now())
			takeCats[i] = e.catalog(b, clocks[i])
			take[i] = setupMover(b, e, takeCats[i], "takeover", i, takeoverTTL, chain)
		}

		for _, cl := range clients {
			b.Run(fmt.Sprintf("handover/chain=%d/clients=%d", chain, cl), func(b *testing.B) {
				runClients(b, cl, e.meter, func(bc *benchClient) error {
					m := hand[bc.ID]
					if err := bc.Time("release", func() error { return c.ReleaseWriter(ctx, m.lease) }); err != nil {
						return err
					}
					return m.acquire(ctx, c, bc)
				})
			})
		}
		for _, cl := range clients {
			b.Run(fmt.Sprintf("takeover/chain=%d/clients=%d", chain, cl), func(b *testing.B) {
				runClients(b, cl, e.meter, func(bc *benchClient) error {
					m, tc := take[bc.ID], takeCats[bc.ID]
					clocks[bc.ID].Advance(takeoverTTL + time.Millisecond) // the holder's heartbeat expires
					next := m.owners[1-m.holder]
					err := bc.Time("hb", func() error {
						_, err := tc.HeartbeatOwner(ctx, next, "10.0.0.1:7420", takeoverTTL)
						return err
					})
					if err != nil {
						return err
					}
					return m.acquire(ctx, tc, bc)
				})
			})
		}
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
func setupMover(b *testing.B, e *benchEnv, c *store, topic string, i int, ttl time.Duration, chain int) *mover {
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
	e.prependChain(b, c, p, chain)
	m.lease = p.Lease()
	return m
}

// BenchmarkIntegrationDynamoDBRollOver: one ledger roll-over of a partition
// by its writer — close the tail ledger (UpdateLedger OPEN→CLOSED, close-*),
// create the next (CreateLedger, create-*), append it to the chain
// (AppendLedger, append-*) — and the retention trim of the oldest ledger
// that keeps the chain at its length (TrimLedgers, trim-*; the compactor's
// call, one per roll-over at steady state). Each client rolls its own
// partition; ops/s counts whole roll-overs.
func BenchmarkIntegrationDynamoDBRollOver(b *testing.B) {
	ctx := b.Context()
	for _, chain := range []int{1, retainedChain} {
		clients := serialClients
		n := clients[len(clients)-1]
		e := newBenchEnv(b)
		c := e.catalog(b, catalog.SystemClock{})
		createTopic(b, c, "roll", n)
		ws := make([]*writer, n)
		for i := range ws {
			owner := ownerID("ingest", i)
			if _, err := c.HeartbeatOwner(ctx, owner, ownerAddr(i), liveTTL); err != nil {
				b.Fatal(err)
			}
			ws[i] = setupWriter(b, e, c, "roll", i, owner, chain)
		}
		for _, cl := range clients {
			b.Run(fmt.Sprintf("chain=%d/clients=%d", chain, cl), func(b *testing.B) {
				runClients(b, cl, e.meter, func(bc *benchClient) error { return ws[bc.ID].roll(ctx, c, bc) })
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
func setupWriter(b *testing.B, e *benchEnv, c *store, topic string, i int, owner string, chain int) *writer {
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
	w.part = e.prependChain(b, c, p, chain-1)
	return w
}

// BenchmarkIntegrationDynamoDBUpdateLedger: a compare-and-set of a ledger's
// metadata without a state change — an ensemble change (the last segment
// replaced in place, alternately by two bookie sets). Each client updates
// its own ledger, from the record its previous update returned.
//
// The embedded twin also races 16 clients on one ledger; on moto that only
// measures serialHTTP's ordering (every racer reads, then all but one lose).
func BenchmarkIntegrationDynamoDBUpdateLedger(b *testing.B) {
	ctx := b.Context()
	e := newBenchEnv(b)
	c := e.catalog(b, catalog.SystemClock{})
	t := createTopic(b, c, "ledgers", 16)
	ls := make([]catalog.LedgerMetadata, 16)
	for i := range ls {
		lease := catalog.WriterLease{Topic: t.Name, TopicID: t.ID, Partition: i, Owner: "ingest-00", Epoch: 1}
		var err error
		if ls[i], err = c.CreateLedger(ctx, ledgerSpec(lease, offsetBase)); err != nil {
			b.Fatal(err)
		}
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, e.meter, func(bc *benchClient) error {
				next := withBookies(ls[bc.ID], bc.Rand.IntN(2))
				var err error
				ls[bc.ID], err = c.UpdateLedger(ctx, next)
				return err
			})
		})
	}
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

// BenchmarkIntegrationDynamoDBGetPartition: reading one partition (random
// index) of a 1,000-partition topic whose partitions all have an owner and
// a chain of chain ledgers: a consistent read of the topic item and one of
// the partition item.
//
// Get and List run at chain=1 only: moto needs about 0.2 s per 20 KB item,
// so a topic of 1,000 chain=1008 partitions takes minutes to write and
// list. Their read cost follows from the item size, which WriterMove and
// RollOver measure at chain=1008 (the embedded twins run both chains).
func BenchmarkIntegrationDynamoDBGetPartition(b *testing.B) {
	ctx := b.Context()
	for _, chain := range listChains {
		e := newBenchEnv(b)
		c := e.catalog(b, catalog.SystemClock{})
		e.bigTopic(b, c, chain)
		for _, clients := range benchClients {
			b.Run(fmt.Sprintf("partitions=%d/chain=%d/clients=%d", bigTopicPartitions, chain, clients), func(b *testing.B) {
				runClients(b, clients, e.meter, func(bc *benchClient) error {
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

// BenchmarkIntegrationDynamoDBListPartitions: listing all partitions of a
// 1,000-partition topic in one call (limit 1000): the topic item, then a
// range query over the partition items (paged by DynamoDB at 1 MB).
// partitions/s = ops/s × 1000.
func BenchmarkIntegrationDynamoDBListPartitions(b *testing.B) {
	ctx := b.Context()
	for _, chain := range listChains {
		e := newBenchEnv(b)
		c := e.catalog(b, catalog.SystemClock{})
		e.bigTopic(b, c, chain)
		cat := catalog.New(c) // ListPartitions is the catalog's, over the driver's ListPartitionRange
		b.Run(fmt.Sprintf("partitions=%d/chain=%d/clients=1", bigTopicPartitions, chain), func(b *testing.B) {
			ops := runClients(b, 1, e.meter, func(*benchClient) error {
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

// benchEnv is one benchmark's table on moto, and the meter every Catalog on
// it sends its requests through.
type benchEnv struct {
	meter *meter
	table string
}

// newBenchEnv creates a fresh table, deleted when b ends, with the ledger
// id counter at counterStart.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	cfg := testenv.AWSConfig(b, testenv.AWSEndpoint(b))
	cfg.HTTPClient = serialHTTP{mu: &motoMu, next: cfg.HTTPClient}
	client := NewClient(cfg)
	e := &benchEnv{meter: &meter{next: client}, table: fmt.Sprintf("sluice-catalog-bench-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))}
	c := e.catalog(b, catalog.SystemClock{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ensureTable(ctx); err != nil {
		b.Fatalf("EnsureTable: %v", err)
	}
	b.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(e.table)})
	})
	counter := item(pkCounters, skLedgerCounter)
	counter["last"] = n(counterStart)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: counter}); err != nil {
		b.Fatal(err)
	}
	return e
}

// catalog returns a catalog driver on the table with its own clock. It is
// the driver, not the *catalog.Catalog callers get, because the set-up
// writes items directly; the argument checks it skips cost nothing next to
// a request.
func (e *benchEnv) catalog(b *testing.B, clock catalog.Clock) *store {
	b.Helper()
	c, err := newStore(e.meter, Options{Table: e.table, Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// prependChain puts k fake ledgers in front of p's chain (writing the
// partition item directly) and returns the partition as stored.
func (e *benchEnv) prependChain(b *testing.B, c *store, p catalog.Partition, k int) catalog.Partition {
	b.Helper()
	if k <= 0 {
		return p
	}
	p.Ledgers = append(fakeChain(k), p.Ledgers...)
	p.LogStartOffset = p.Ledgers[0].FirstOffset
	p.Version++
	if err := c.putIf(b.Context(), partitionItem(p), versionIs(p.Version-1)); err != nil {
		b.Fatalf("prepend chain: %v", err)
	}
	return p
}

// bigTopic creates topic "big" with bigTopicPartitions partitions, each
// owned (by one of 20 owners) with a chain of chain fake ledgers, written
// directly in batches.
func (e *benchEnv) bigTopic(b *testing.B, c *store, chain int) {
	b.Helper()
	t := createTopic(b, c, "big", bigTopicPartitions)
	var reqs []types.WriteRequest
	for i := range bigTopicPartitions {
		ledgers := fakeChain(chain)
		p := catalog.Partition{Topic: t.Name, TopicID: t.ID, Index: i, Owner: ownerID("ingest", i%20), Epoch: 1,
			Ledgers: ledgers, LogStartOffset: ledgers[0].FirstOffset, Version: 1}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: partitionItem(p)}})
		if len(reqs) == 25 || i == bigTopicPartitions-1 { // BatchWriteItem's limit
			if err := c.batchWrite(b.Context(), reqs); err != nil {
				b.Fatal(err)
			}
			reqs = nil
		}
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
