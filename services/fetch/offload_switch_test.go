package fetch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// A consumer in the middle of each ledger when it is offloaded (the
// catalog CAS to OFFLOADED, then the bookies drop it) reads on without an
// error, a gap or a duplicate: its next bookie read fails, the copy
// re-reads the ledger's metadata and continues from the object. The entry
// cache is tiny, so every read after the switch goes to the object.
func TestFetchReaderSurvivesOffloadMidRead(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "m", 1)
	const n = 3000
	e.produce(t, "m", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "m", 0)
	log := &warnRecorder{}
	svc, cons := e.objectCopy(t, fetch.Config{Log: partlog.Config{CacheBytes: 4 << 10}, Logger: slog.New(log)}, b)
	ctx := context.Background()
	next := int64(0)
	fetchSome := func() {
		t.Helper()
		resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "m", Offset: next, MaxRecords: 30}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		if len(resp.Msg.Records) == 0 {
			t.Fatalf("fetch at %d: no record", next)
		}
		for _, r := range resp.Msg.Records {
			checkRecord(t, r, next)
			next++
		}
	}
	for i, ref := range sealed {
		end := p.Ledgers[i+1].FirstOffset
		for next < ref.FirstOffset+(end-ref.FirstOffset)/2 {
			fetchSome()
		}
		e.offload(t, b, ref.ID, nil) // mid-ledger
		fetchSome()
	}
	for next < n {
		fetchSome()
	}
	if st := svc.Logs().Stats(); st.ObjectGets == 0 || st.CacheBytes > 4<<10 {
		t.Fatalf("after the switches: %+v (want ranged GETs, cache within 4 KiB)", st)
	}
	if s, w := log.switches(), log.all(); s != len(sealed) || len(w) > 0 {
		t.Fatalf("%d switches from the bookies to an object (want %d), warnings %q", s, len(sealed), w)
	}
}

// Retention trims ledgers from the front of the chain: a consumer below
// the new log start gets OUT_OF_RANGE with it, even with a chain cached
// for a minute — its read of a trimmed ledger fails (object deleted,
// bookies dropped it, metadata gone) and the copy re-reads the chain
// rather than failing.
func TestFetchOutOfRangeAfterTrim(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "r", 1)
	const n = 3000
	e.produce(t, "r", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "r", 0)
	if len(sealed) < 3 {
		t.Fatalf("want at least 3 sealed ledgers, got %d", len(sealed))
	}
	keys := []string{e.offload(t, b, sealed[0].ID, nil), e.offload(t, b, sealed[1].ID, nil)}
	_, cons := e.objectCopy(t, fetch.Config{Log: partlog.Config{CacheBytes: 4 << 10, ChainTTL: time.Minute}}, b)
	ctx := context.Background()
	// Readers in ledgers 0, 1 (objects) and 2 (bookies): chain and ledger
	// states cached.
	for _, o := range []int64{5, sealed[1].FirstOffset + 5, sealed[2].FirstOffset + 5} {
		readAll(t, cons, "r", 0, o, o+10, 10)
	}

	trim := func(through int, version int64) catalog.Partition {
		t.Helper()
		np, err := e.c.Catalog.TrimLedgers(ctx, p.TopicID, 0, sealed[through].ID, version)
		if err != nil {
			t.Fatal(err)
		}
		return np
	}
	wantOutOfRange := func(offset, start int64) {
		t.Helper()
		_, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "r", Offset: offset, MaxRecords: 10}))
		ei := errorInfo(err)
		if connect.CodeOf(err) != connect.CodeOutOfRange || ei == nil || ei.Reason != fetch.ReasonOutOfRange || ei.Metadata["log_start_offset"] != strconv.FormatInt(start, 10) {
			t.Fatalf("fetch at %d after the trim: want OUT_OF_RANGE with log_start_offset %d, got %v (%v)", offset, start, err, ei)
		}
	}

	// Trim the two offloaded ledgers; retention then deletes their objects
	// and metadata.
	np := trim(1, p.Version)
	if np.LogStartOffset != sealed[2].FirstOffset {
		t.Fatalf("log start %d after the trim, want %d", np.LogStartOffset, sealed[2].FirstOffset)
	}
	for i, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		m, err := e.c.Catalog.GetLedger(ctx, sealed[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		m.State = catalog.LedgerDeleted
		if m, err = e.c.Catalog.UpdateLedger(ctx, m); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := e.c.Catalog.DeleteLedgerMetadata(ctx, m.ID, m.Version); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantOutOfRange(15, np.LogStartOffset)
	wantOutOfRange(sealed[1].FirstOffset+15, np.LogStartOffset)
	readAll(t, cons, "r", 0, sealed[2].FirstOffset+15, sealed[2].FirstOffset+30, 10)

	// Trim a bookie-resident ledger, which the bookies then drop.
	np = trim(2, np.Version)
	for _, bk := range e.c.Bookies {
		if err := bk.DeleteLedger(int64(sealed[2].ID)); err != nil {
			t.Fatal(err)
		}
	}
	wantOutOfRange(sealed[2].FirstOffset+30, np.LogStartOffset)
	resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "r", Start: sluicev1.StartPosition_START_POSITION_EARLIEST, MaxRecords: 1}))
	if err != nil || len(resp.Msg.Records) != 1 || resp.Msg.LogStartOffset != np.LogStartOffset {
		t.Fatalf("earliest after the trims: %v %v", resp, err)
	}
	checkRecord(t, resp.Msg.Records[0], np.LogStartOffset)
	readAll(t, cons, "r", 0, np.LogStartOffset, n, 200)
}

// A group session (Subscribe) reading a partition whose ledgers are
// offloaded one by one while it is in each of them receives every record
// exactly once and its stream never fails.
func TestSessionReadsThroughOffloads(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "s", 1)
	const n = 3000
	e.produce(t, "s", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "s", 0)
	warns := &warnRecorder{}
	_, cons := e.objectCopy(t, fetch.Config{BalanceInterval: 50 * time.Millisecond, Log: partlog.Config{CacheBytes: 4 << 10}, Logger: slog.New(warns)}, b)
	m := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "s", Topics: []string{"s"}, Start: sluicev1.StartPosition_START_POSITION_EARLIEST}, false)
	waitFor(t, "the lease", 10*time.Second, func() bool { return m.held() == 1 })
	grant := func(records int64) {
		t.Helper()
		if _, err := cons.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: "s", SessionId: m.sess, Credits: &sluicev1.Credits{Records: records, Bytes: 1 << 20}})); err != nil {
			t.Fatal(err)
		}
	}
	next := 0 // ledgers offloaded so far
	for got := 0; got < n; {
		grant(100)
		want := min(got+100, n)
		waitFor(t, fmt.Sprintf("%d records", want), 10*time.Second, func() bool { return m.count() >= want })
		got = m.count()
		// Offload each sealed ledger once the session is past its middle.
		if next < len(sealed) && int64(got) > (p.Ledgers[next].FirstOffset+p.Ledgers[next+1].FirstOffset)/2 && int64(got) < p.Ledgers[next+1].FirstOffset {
			e.offload(t, b, sealed[next].ID, nil)
			next++
		}
		select {
		case err := <-m.done:
			t.Fatalf("the session ended after %d records: %v", got, err)
		default:
		}
	}
	if next != len(sealed) {
		t.Fatalf("offloaded %d of %d ledgers while the session was in them", next, len(sealed))
	}
	if w := warns.all(); len(w) > 0 {
		t.Fatalf("the session's reads failed (and were retried): %q", w)
	}
	if s := warns.switches(); s != len(sealed) {
		t.Fatalf("%d switches from the bookies to an object, want one per ledger (%d)", s, len(sealed))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for o := range n {
		if c := m.records[fmt.Sprintf("s/0@%d", o)]; c != 1 {
			t.Fatalf("offset %d delivered %d times", o, c)
		}
	}
}

// A follower long-polling the tail while a producer writes and every
// ledger is offloaded as soon as it is sealed — concurrently, wherever the
// follower is — reads every record once, in order, without an error.
func TestFollowerThroughConcurrentOffloads(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "f", 1)
	const n, batch = 4000, 50
	b := memBucket(t)
	_, cons := e.objectCopy(t, fetch.Config{Log: partlog.Config{CacheBytes: 16 << 10}}, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // producer
		defer wg.Done()
		part := int32(0)
		for i := 0; i < n; i += batch {
			var recs []*sluicev1.Record
			for j := i; j < i+batch; j++ {
				recs = append(recs, &sluicev1.Record{Key: []byte("k" + strconv.Itoa(j)), Value: []byte(fmt.Sprintf("v%d", j)), Timestamp: int64(1_000_000 + j)})
			}
			if _, err := e.prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "f", Partition: &part, Records: recs})); err != nil {
				errs <- fmt.Errorf("produce %d: %w", i, err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var pos atomic.Int64 // the follower's position, for the failure message
	go func() {          // follower
		defer wg.Done()
		for next := int64(0); next < n; {
			resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "f", Offset: next, MaxRecords: 40, MaxWaitMs: 500}))
			if err != nil {
				errs <- fmt.Errorf("fetch at %d: %w", next, err)
				return
			}
			for _, r := range resp.Msg.Records {
				if r.Offset != next || string(r.Value) != fmt.Sprintf("v%d", next) || r.Timestamp != 1_000_000+next {
					errs <- fmt.Errorf("at %d got offset %d value %q", next, r.Offset, r.Value)
					return
				}
				next++
			}
			pos.Store(next)
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	offloaded := map[catalog.LedgerID]bool{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
		}
		p, err := e.c.Catalog.GetPartition(context.Background(), "f", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(p.Ledgers); i++ {
			if id := p.Ledgers[i].ID; !offloaded[id] {
				e.offload(t, b, id, nil)
				offloaded[id] = true
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("%v (follower at %d, %d ledgers offloaded)", err, pos.Load(), len(offloaded))
	}
	if len(offloaded) < 3 {
		t.Fatalf("only %d ledgers offloaded: the test means little", len(offloaded))
	}
}

// A ledger's object rewritten under a new key (a compacted segment swapped
// in: the catalog's Location replaced, the old object deleted) while a
// reader is in it: the reader's next GET of the old key finds nothing,
// the copy re-reads the metadata and reads on from the new object.
func TestFetchFollowsRewrittenObject(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "w", 1)
	const n = 3000
	e.produce(t, "w", 0, 0, n, 50)
	b := memBucket(t)
	_, sealed := e.sealedLedgers(t, "w", 0)
	_, obj := e.segmentOf(t, sealed[0].ID, nil)
	old := e.offload(t, b, sealed[0].ID, nil)
	_, cons := e.objectCopy(t, fetch.Config{Log: partlog.Config{CacheBytes: 4 << 10}}, b)
	readAll(t, cons, "w", 0, 0, 100, 50)

	ctx := context.Background()
	m, err := e.c.Catalog.GetLedger(ctx, sealed[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	m.Location = old + ".c1.seg"
	if err := b.WriteAll(ctx, m.Location, obj, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Catalog.UpdateLedger(ctx, m); err != nil {
		t.Fatalf("swap in the rewritten object: %v", err)
	}
	if err := b.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	readAll(t, cons, "w", 0, 100, n, 50)
}
