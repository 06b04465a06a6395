package bookkeepingtest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var transactionTests = []test{
	{"GetTxnNotFound", testTxnNotFound},
	{"PutTxnCreatesAtVersionZero", testTxnCreate},
	{"PutTxnStaleVersionConflicts", testTxnStaleVersion},
	{"ConcurrentPutTxnOneWins", testTxnConcurrentPut},
	{"RoundTripEveryField", testTxnRoundTrip},
	{"AtTheLimits", testTxnAtTheLimits},
	{"ListTxnsPages", testListTxnsPages},
	{"InitProducerAndPutTxnShareTheRecord", testTxnInitProducerSharesTheRecord},
	{"InitProducerRacingPutTxn", testTxnInitProducerRacingPutTxn},
	{"Validation", testTxnValidation},
}

// tid returns a transactional id of this test's own. All of them start
// with txnPrefix.
func (e *env) tid(suffix string) string { return e.txnPrefix() + suffix }

func (e *env) txnPrefix() string { return "tx-" + e.id + "-" }

func (e *env) getTxn(id string) bookkeeping.Txn {
	e.t.Helper()
	t, err := e.Transactions.GetTxn(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetTxn(%q): %v", id, err)
	}
	return t
}

func (e *env) putTxn(t bookkeeping.Txn) bookkeeping.Txn {
	e.t.Helper()
	got, err := e.Transactions.PutTxn(e.ctx, t)
	if err != nil {
		e.t.Fatalf("PutTxn(%+v): %v", t, err)
	}
	return got
}

// wantTxn fails the test unless got is want field by field (Deadline by
// time.Equal, and in UTC when set; nil and empty lists are not the same:
// the contract returns nil).
func wantTxn(t *testing.T, what string, got, want bookkeeping.Txn) {
	t.Helper()
	g, w := got, want
	g.Deadline, w.Deadline = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) || !got.Deadline.Equal(want.Deadline) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	if !got.Deadline.IsZero() && got.Deadline.Location() != time.UTC {
		t.Fatalf("%s: deadline %v is not in UTC", what, got.Deadline)
	}
}

// stored is want as PutTxn returns it: the stored form at version.
func stored(t bookkeeping.Txn, version int64) bookkeeping.Txn {
	t = t.Stored()
	t.Version = version
	return t
}

// openTxn is an Ongoing transaction of id with one partition and group.
func openTxn(id string, pid int64, version int64) bookkeeping.Txn {
	return bookkeeping.Txn{
		TransactionalID: id, ProducerID: pid, Epoch: 0, Status: bookkeeping.TxnOngoing,
		Timeout: time.Minute, Deadline: time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC),
		Partitions: []bookkeeping.TxnPartition{{TopicID: tid, Partition: 0}}, Groups: []string{"g"}, Version: version,
	}
}

func testTxnNotFound(t *testing.T, e *env) {
	id := e.tid("none")
	_, err := e.Transactions.GetTxn(e.ctx, id)
	wantErr(t, "GetTxn of an id never stored", err, bookkeeping.ErrNotFound)
	_, err = e.Transactions.PutTxn(e.ctx, openTxn(id, 1, 3))
	wantErr(t, "PutTxn at version 3 of an id never stored", err, bookkeeping.ErrConflict)
	_, err = e.Transactions.PutTxn(e.ctx, openTxn(id, 1, 1))
	wantErr(t, "PutTxn at version 1 of an id never stored", err, bookkeeping.ErrConflict)
	_, err = e.Transactions.GetTxn(e.ctx, id)
	wantErr(t, "GetTxn after PutTxn conflicts", err, bookkeeping.ErrNotFound)
}

// testTxnCreate: version 0 creates the record at version 1, once; every
// write moves the version by one.
func testTxnCreate(t *testing.T, e *env) {
	id := e.tid("new")
	pid, err := e.Producers.AllocateProducerID(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := bookkeeping.Txn{TransactionalID: id, ProducerID: pid, Status: bookkeeping.TxnEmpty, Timeout: time.Minute}
	put := e.putTxn(first)
	wantTxn(t, "PutTxn at version 0", put, stored(first, 1))
	wantTxn(t, "GetTxn after the create", e.getTxn(id), put)

	again := first
	again.Timeout = time.Hour
	_, err = e.Transactions.PutTxn(e.ctx, again)
	wantErr(t, "a second PutTxn at version 0", err, bookkeeping.ErrConflict)
	wantTxn(t, "GetTxn after the second create failed", e.getTxn(id), put)

	next := openTxn(id, pid, 1)
	put = e.putTxn(next)
	wantTxn(t, "PutTxn at version 1", put, stored(next, 2))
	wantTxn(t, "GetTxn after PutTxn at version 1", e.getTxn(id), put)
}

// testTxnStaleVersion: two coordinators read the same version; the first
// to write wins, the other fails with ErrConflict and writes nothing.
func testTxnStaleVersion(t *testing.T, e *env) {
	id := e.tid("stale")
	base := e.putTxn(bookkeeping.Txn{TransactionalID: id, ProducerID: 5, Status: bookkeeping.TxnEmpty})
	a, b := openTxn(id, 5, base.Version), openTxn(id, 5, base.Version)
	a.Partitions[0].Partition, b.Partitions[0].Partition = 1, 2
	wonA := e.putTxn(a)
	_, err := e.Transactions.PutTxn(e.ctx, b)
	wantErr(t, "PutTxn at a version another writer moved", err, bookkeeping.ErrConflict)
	wantTxn(t, "GetTxn after the loser's PutTxn", e.getTxn(id), wonA)
	// The loser reads again and decides again.
	b.Version = wonA.Version
	wonB := e.putTxn(b)
	wantTxn(t, "PutTxn at the version read again", wonB, stored(b, wonA.Version+1))
	// An older version still loses.
	b.Version = base.Version
	_, err = e.Transactions.PutTxn(e.ctx, b)
	wantErr(t, "PutTxn at an older version", err, bookkeeping.ErrConflict)
}

// testTxnConcurrentPut: writers racing from one version — or to create one
// record — exactly one wins; the store holds the winner's record.
func testTxnConcurrentPut(t *testing.T, e *env) {
	const n = 8
	id := e.tid("race")
	base := e.putTxn(bookkeeping.Txn{TransactionalID: id, ProducerID: 9, Status: bookkeeping.TxnEmpty})
	for _, tc := range []struct {
		name    string
		id      string
		version int64
	}{{"from one version", id, base.Version}, {"to create", e.tid("race-create"), 0}} {
		won := make([]bookkeeping.Txn, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				x := openTxn(tc.id, 9, tc.version)
				x.Partitions[0].Partition = int32(i)
				won[i], errs[i] = e.Transactions.PutTxn(e.ctx, x)
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%s: writers %d and %d both won", tc.name, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, bookkeeping.ErrConflict):
				t.Fatalf("%s: writer %d: %v, want ErrConflict or success", tc.name, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer won", tc.name)
		}
		if won[winner].Version != tc.version+1 || won[winner].Partitions[0].Partition != int32(winner) {
			t.Fatalf("%s: the winner got %+v, want its record at version %d", tc.name, won[winner], tc.version+1)
		}
		wantTxn(t, tc.name+": GetTxn after the race", e.getTxn(tc.id), won[winner])
	}
}

// testTxnRoundTrip: every field comes back as written, in every status.
// Timeout and Deadline come back to the millisecond (in UTC): the
// contract's precision, the coordinator's clock is no finer in effect.
func testTxnRoundTrip(t *testing.T, e *env) {
	id := e.tid("fields")
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	version := int64(0)
	statuses := []bookkeeping.TxnStatus{bookkeeping.TxnEmpty, bookkeeping.TxnOngoing, bookkeeping.TxnPrepareCommit,
		bookkeeping.TxnPrepareAbort, bookkeeping.TxnCompleteCommit, bookkeeping.TxnCompleteAbort}
	for i, status := range statuses {
		x := bookkeeping.Txn{
			TransactionalID: id, ProducerID: 1<<62 + int64(i), Epoch: int16(i), Status: status,
			Timeout:  1500*time.Millisecond + 999*time.Microsecond + time.Duration(i)*time.Second,
			Deadline: time.Date(2030, 6, 7, 8, 9, 10, 123_456_789+i, zone),
			Partitions: []bookkeeping.TxnPartition{
				{TopicID: "zz-topic", Partition: 3}, {TopicID: strings.Repeat("i", bookkeeping.MaxNameBytes), Partition: bookkeeping.MaxPartitions - 1},
				{TopicID: "aa-topic", Partition: 0}, {TopicID: "zz-topic", Partition: int32(10 + i)},
			},
			Groups: []string{"ünïcödé", "g " + fmt.Sprint(i), strings.Repeat("g", bookkeeping.MaxNameBytes)},
			Offsets: []bookkeeping.TxnOffset{
				{Group: "ünïcödé", Topic: "in", TopicID: "aa-topic", Partition: 2, Offset: int64(i)},
				{Group: strings.Repeat("g", bookkeeping.MaxNameBytes), Topic: strings.Repeat("t", bookkeeping.MaxNameBytes),
					TopicID: strings.Repeat("i", bookkeeping.MaxNameBytes), Partition: bookkeeping.MaxPartitions - 1, Offset: bookkeeping.MaxOffset},
			},
			BumpedByCoordinator: i%2 == 0, PrevProducerID: int64(i%3) * (1<<61 + 5), Version: version,
			Next:     []bookkeeping.TxnPartition{{TopicID: "zz-topic", Partition: int32(i)}, {TopicID: "aa-topic", Partition: bookkeeping.MaxPartitions - 1}},
			Ended:    statuses[(i+1)%len(statuses)],
			TimedOut: i%3 == 1,
		}
		if i == len(statuses)-1 {
			x.Epoch = bookkeeping.MaxProducerEpoch
		}
		put := e.putTxn(x)
		want := x
		want.Timeout = 1500*time.Millisecond + time.Duration(i)*time.Second
		want.Deadline = time.Date(2030, 6, 7, 2, 39, 10, 123_000_000, time.UTC)
		want.Version = version + 1
		wantTxn(t, fmt.Sprintf("PutTxn in status %v", status), put, want)
		wantTxn(t, fmt.Sprintf("GetTxn in status %v", status), e.getTxn(id), want)
		version = put.Version
	}
	// Nothing in any optional field: zero, nil, false.
	empty := bookkeeping.Txn{TransactionalID: id, ProducerID: 1, Status: bookkeeping.TxnCompleteCommit,
		Partitions: []bookkeeping.TxnPartition{}, Groups: []string{}, Offsets: []bookkeeping.TxnOffset{}, Next: []bookkeeping.TxnPartition{}, Version: version}
	put := e.putTxn(empty)
	want := bookkeeping.Txn{TransactionalID: id, ProducerID: 1, Status: bookkeeping.TxnCompleteCommit, Version: version + 1}
	wantTxn(t, "PutTxn with nothing optional", put, want)
	wantTxn(t, "GetTxn with nothing optional", e.getTxn(id), want)
}

// testTxnAtTheLimits: a record with MaxTxnPartitions partitions and
// MaxTxnGroups groups, every name at MaxNameBytes, is stored and read
// back; one more of either is refused.
func testTxnAtTheLimits(t *testing.T, e *env) {
	id := e.tid("limits")
	x := bookkeeping.Txn{TransactionalID: id, ProducerID: math.MaxInt64, Epoch: bookkeeping.MaxProducerEpoch, Status: bookkeeping.TxnPrepareCommit,
		Timeout: bookkeeping.MaxTxnTimeout, Deadline: time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC), PrevProducerID: math.MaxInt64 - 1}
	for i := range bookkeeping.MaxTxnPartitions {
		x.Partitions = append(x.Partitions, bookkeeping.TxnPartition{
			TopicID: fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i/100), Partition: int32(i % 100 * 600)})
	}
	for i := range bookkeeping.MaxTxnGroups {
		x.Groups = append(x.Groups, fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i))
	}
	for i := range bookkeeping.MaxTxnOffsets {
		x.Offsets = append(x.Offsets, bookkeeping.TxnOffset{Group: x.Groups[i%10], Topic: fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i/1000),
			TopicID: x.Partitions[0].TopicID, Partition: int32(i % 1000), Offset: bookkeeping.MaxOffset})
	}
	put := e.putTxn(x)
	wantTxn(t, "PutTxn at the limits", put, stored(x, 1))
	wantTxn(t, "GetTxn at the limits", e.getTxn(id), put)

	more := put
	more.Partitions = append(slices.Clone(put.Partitions), bookkeeping.TxnPartition{TopicID: "t", Partition: 1})
	_, err := e.Transactions.PutTxn(e.ctx, more)
	wantValidation(t, "PutTxn with a partition too many", err, "txn.partitions")
	more = put
	more.Groups = append(slices.Clone(put.Groups), "g")
	_, err = e.Transactions.PutTxn(e.ctx, more)
	wantValidation(t, "PutTxn with a group too many", err, "txn.groups")
	more = put
	more.Offsets = append(slices.Clone(put.Offsets), bookkeeping.TxnOffset{Group: "g", Topic: "t", TopicID: "t", Offset: 1})
	_, err = e.Transactions.PutTxn(e.ctx, more)
	wantValidation(t, "PutTxn with an offset too many", err, "txn.offsets")
}

// listOwnTxns pages through ListTxns, limit records a page, from the
// beginning or from after, and returns the records of this test (other
// tests' may be listed around them on a shared store). Every page is
// checked: at most limit records, more only with a non-empty page, no id
// twice in the pass, and — on a backend that lists in id order — ids
// strictly increasing after the cursor.
func (e *env) listOwnTxns(after string, limit int) []bookkeeping.Txn {
	e.t.Helper()
	var own []bookkeeping.Txn
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			e.t.Fatalf("ListTxns(limit %d): more than %d pages", limit, pages)
		}
		page, more, err := e.Transactions.ListTxns(e.ctx, after, limit)
		if err != nil {
			e.t.Fatalf("ListTxns(%q, %d): %v", after, limit, err)
		}
		if len(page) > limit || (more && len(page) == 0) {
			e.t.Fatalf("ListTxns(%q, %d) returned %d records, more=%v", after, limit, len(page), more)
		}
		prev := after
		for _, x := range page {
			if seen[x.TransactionalID] {
				e.t.Fatalf("ListTxns listed %q twice in one pass (limit %d)", x.TransactionalID, limit)
			}
			seen[x.TransactionalID] = true
			if e.ListTxnsInIDOrder && x.TransactionalID <= prev {
				e.t.Fatalf("ListTxns(%q, %d): %q does not sort after %q", after, limit, x.TransactionalID, prev)
			}
			prev = x.TransactionalID
			if strings.HasPrefix(x.TransactionalID, e.txnPrefix()) {
				own = append(own, x)
			}
		}
		if !more {
			return own
		}
		after = page[len(page)-1].TransactionalID
	}
}

func txnIDs(ts []bookkeeping.Txn) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.TransactionalID
	}
	return ids
}

// testListTxnsPages: a pass of ListTxns lists every record once, whatever
// the page size, in one order (id order where the backend says so); a pass
// after any id, stored or not, lists the records after it in that order.
func testListTxnsPages(t *testing.T, e *env) {
	var ids []string
	for i, suffix := range []string{"m", "A", "z", "a", "é", "a.b", "ab", "a b", "Z9"} {
		id := e.tid(suffix)
		ids = append(ids, id)
		if i%3 == 0 {
			if _, err := e.Producers.InitProducer(e.ctx, id); err != nil {
				t.Fatalf("InitProducer(%q): %v", id, err)
			}
			continue
		}
		x := openTxn(id, int64(100+i), 0)
		x.Groups = []string{fmt.Sprint("g", i)}
		e.putTxn(x)
	}
	all := e.listOwnTxns("", bookkeeping.MaxTxnListLimit)
	order := txnIDs(all)
	if got, want := slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
		t.Fatalf("ListTxns listed %q, want each of %q once", order, want)
	}
	if e.ListTxnsInIDOrder && !slices.IsSorted(order) {
		t.Fatalf("ListTxns listed %q, not in id order", order)
	}
	for _, x := range all {
		wantTxn(t, "a listed record", x, e.getTxn(x.TransactionalID))
	}
	for _, limit := range []int{1, 2, 4, len(ids) - 1, len(ids)} {
		if got := txnIDs(e.listOwnTxns("", limit)); !slices.Equal(got, order) {
			t.Fatalf("ListTxns with limit %d listed %q, want %q (the order of one page)", limit, got, order)
		}
	}
	// After each stored id: the records after it in the order.
	for i, id := range order {
		if got := txnIDs(e.listOwnTxns(id, 3)); !slices.Equal(got, order[i+1:]) {
			t.Fatalf("ListTxns after %q listed %q, want %q", id, got, order[i+1:])
		}
	}
	// After an id not stored: a suffix of the order (in id order: the ids
	// above it).
	for _, suffix := range []string{"a!", "b", "~"} {
		after := e.tid(suffix)
		got := txnIDs(e.listOwnTxns(after, 2))
		if len(got) > len(order) || !slices.Equal(got, order[len(order)-len(got):]) {
			t.Fatalf("ListTxns after %q (not stored) listed %q, not a suffix of %q", after, got, order)
		}
		if e.ListTxnsInIDOrder {
			want := slices.DeleteFunc(slices.Clone(order), func(id string) bool { return id <= after })
			if !slices.Equal(got, want) {
				t.Fatalf("ListTxns after %q (not stored) listed %q, want %q", after, got, want)
			}
		}
	}
}

// testTxnInitProducerSharesTheRecord: InitProducer and PutTxn write one
// record — each sees the other's producer id, epoch and version — and
// InitProducer bumps only an idle one.
func testTxnInitProducerSharesTheRecord(t *testing.T, e *env) {
	id := e.tid("shared")
	p, err := e.Producers.InitProducer(e.ctx, id)
	if err != nil {
		t.Fatalf("InitProducer: %v", err)
	}
	rec := e.getTxn(id)
	wantTxn(t, "GetTxn after the first InitProducer", rec,
		bookkeeping.Txn{TransactionalID: id, ProducerID: p.ID, Epoch: 0, Status: bookkeeping.TxnEmpty, Version: 1})

	// The coordinator opens a transaction at InitProducer's session.
	open := openTxn(id, p.ID, rec.Version)
	rec = e.putTxn(open)
	// InitProducer does not touch an open transaction …
	_, err = e.Producers.InitProducer(e.ctx, id)
	wantErr(t, "InitProducer while a transaction is open", err, bookkeeping.ErrConflict)
	wantTxn(t, "GetTxn after InitProducer refused", e.getTxn(id), rec)
	// … nor one that is ending.
	prepare := rec
	prepare.Epoch, prepare.Status, prepare.Deadline = 1, bookkeeping.TxnPrepareAbort, time.Time{}
	rec = e.putTxn(prepare)
	_, err = e.Producers.InitProducer(e.ctx, id)
	wantErr(t, "InitProducer while a transaction is ending", err, bookkeeping.ErrConflict)
	wantTxn(t, "GetTxn after InitProducer refused", e.getTxn(id), rec)

	// Complete: InitProducer bumps the coordinator's epoch and leaves the
	// record idle at the next version, keeping the timeout.
	complete := rec
	complete.Status, complete.Partitions, complete.Groups = bookkeeping.TxnCompleteAbort, nil, nil
	rec = e.putTxn(complete)
	p2, err := e.Producers.InitProducer(e.ctx, id)
	if err != nil || p2 != (bookkeeping.Producer{ID: p.ID, Epoch: 2}) {
		t.Fatalf("InitProducer after the transaction completed = %+v, %v; want id %d epoch 2", p2, err, p.ID)
	}
	bumped := bookkeeping.Txn{TransactionalID: id, ProducerID: p.ID, Epoch: 2, Status: bookkeeping.TxnEmpty,
		Timeout: time.Minute, BumpedByCoordinator: true, Version: rec.Version + 1}
	wantTxn(t, "GetTxn after InitProducer", e.getTxn(id), bumped)
	// A PutTxn from before the bump loses.
	stale := rec
	stale.Status = bookkeeping.TxnOngoing
	_, err = e.Transactions.PutTxn(e.ctx, stale)
	wantErr(t, "PutTxn at the version before InitProducer", err, bookkeeping.ErrConflict)

	// The coordinator bumps the epoch; InitProducer continues from it.
	coord := bumped
	coord.Epoch, coord.BumpedByCoordinator = 7, false
	rec = e.putTxn(coord)
	if p3, err := e.Producers.InitProducer(e.ctx, id); err != nil || p3 != (bookkeeping.Producer{ID: p.ID, Epoch: 8}) {
		t.Fatalf("InitProducer after PutTxn set epoch 7 = %+v, %v; want id %d epoch 8", p3, err, p.ID)
	}
	rec = e.getTxn(id)

	// A session never gets the highest epoch (transaction markers need one
	// above the data's): at the one below it InitProducer moves the record
	// to a new id.
	last := rec
	last.Epoch = bookkeeping.MaxProducerEpoch - 1
	rec = e.putTxn(last)
	p4, err := e.Producers.InitProducer(e.ctx, id)
	if err != nil || p4.ID == p.ID || p4.ID < 1 || p4.Epoch != 0 {
		t.Fatalf("InitProducer at the epoch below the highest = %+v, %v; want a new id (not %d) at epoch 0", p4, err, p.ID)
	}
	wantTxn(t, "GetTxn after InitProducer took a new id", e.getTxn(id), bookkeeping.Txn{TransactionalID: id, ProducerID: p4.ID,
		Epoch: 0, Status: bookkeeping.TxnEmpty, Timeout: time.Minute, Version: rec.Version + 1})

	// A record PutTxn created is InitProducer's too.
	other := e.tid("created")
	pid, err := e.Producers.AllocateProducerID(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	created := e.putTxn(bookkeeping.Txn{TransactionalID: other, ProducerID: pid, Epoch: 5, Status: bookkeeping.TxnCompleteCommit, Timeout: time.Second})
	if p5, err := e.Producers.InitProducer(e.ctx, other); err != nil || p5 != (bookkeeping.Producer{ID: pid, Epoch: 6}) {
		t.Fatalf("InitProducer of a record PutTxn created = %+v, %v; want id %d epoch 6", p5, err, pid)
	}
	if got := e.getTxn(other); got.Version != created.Version+1 || got.Epoch != 6 || got.Timeout != time.Second {
		t.Fatalf("GetTxn after InitProducer = %+v, want epoch 6 at version %d, timeout 1s", got, created.Version+1)
	}
}

// testTxnInitProducerRacingPutTxn: an InitProducer and a PutTxn from the
// version both read race; either the PutTxn wins and InitProducer bumps
// over it, or InitProducer wins and the PutTxn fails with ErrConflict.
// Never both from the same version.
func testTxnInitProducerRacingPutTxn(t *testing.T, e *env) {
	id := e.tid("init-race")
	if _, err := e.Producers.InitProducer(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for round := range 6 {
		cur := e.getTxn(id)
		x := cur
		x.Epoch += 10 // as a coordinator's bumps would
		x.Timeout = time.Duration(round+1) * time.Second
		var (
			put     bookkeeping.Txn
			putErr  error
			p       bookkeeping.Producer
			initErr error
			wg      sync.WaitGroup
		)
		wg.Go(func() { put, putErr = e.Transactions.PutTxn(e.ctx, x) })
		wg.Go(func() { p, initErr = e.Producers.InitProducer(e.ctx, id) })
		wg.Wait()
		if initErr != nil {
			t.Fatalf("round %d: InitProducer racing one PutTxn: %v", round, initErr)
		}
		got := e.getTxn(id)
		switch {
		case putErr == nil:
			outcomes["put first"]++
			if put.Version != cur.Version+1 || p != (bookkeeping.Producer{ID: cur.ProducerID, Epoch: x.Epoch + 1}) ||
				got.Version != cur.Version+2 || got.Epoch != x.Epoch+1 || got.Timeout != x.Timeout {
				t.Fatalf("round %d: PutTxn won at version %d, then InitProducer gave %+v and the record is %+v; want epoch %d, version %d, timeout %v",
					round, put.Version, p, got, x.Epoch+1, cur.Version+2, x.Timeout)
			}
		case errors.Is(putErr, bookkeeping.ErrConflict):
			outcomes["init first"]++
			if p != (bookkeeping.Producer{ID: cur.ProducerID, Epoch: cur.Epoch + 1}) || got.Version != cur.Version+1 ||
				got.Epoch != cur.Epoch+1 || got.Timeout != cur.Timeout {
				t.Fatalf("round %d: InitProducer won with %+v and the record is %+v; want epoch %d at version %d, timeout %v",
					round, p, got, cur.Epoch+1, cur.Version+1, cur.Timeout)
			}
		default:
			t.Fatalf("round %d: PutTxn racing InitProducer: %v, want success or ErrConflict", round, putErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

func testTxnValidation(t *testing.T, e *env) {
	for _, id := range []string{"", strings.Repeat("x", bookkeeping.MaxNameBytes+1), "a\x00b", "\xfe"} {
		_, err := e.Transactions.GetTxn(e.ctx, id)
		wantValidation(t, fmt.Sprintf("GetTxn(%q)", id), err, "transactional_id")
	}
	id := e.tid("invalid")
	for _, c := range []struct {
		field string
		edit  func(*bookkeeping.Txn)
	}{
		{"txn.transactional_id", func(x *bookkeeping.Txn) { x.TransactionalID = "" }},
		{"txn.producer_id", func(x *bookkeeping.Txn) { x.ProducerID = 0 }},
		{"txn.epoch", func(x *bookkeeping.Txn) { x.Epoch = -1 }},
		{"txn.status", func(x *bookkeeping.Txn) { x.Status = 0 }},
		{"txn.timeout", func(x *bookkeeping.Txn) { x.Timeout = bookkeeping.MaxTxnTimeout + time.Millisecond }},
		{"txn.deadline", func(x *bookkeeping.Txn) { x.Deadline = time.Unix(-1, 0) }},
		{"txn.partitions[0].topic_id", func(x *bookkeeping.Txn) { x.Partitions[0].TopicID = "" }},
		{"txn.partitions[0].partition", func(x *bookkeeping.Txn) { x.Partitions[0].Partition = bookkeeping.MaxPartitions }},
		{"txn.partitions[1]", func(x *bookkeeping.Txn) { x.Partitions = append(x.Partitions, x.Partitions[0]) }},
		{"txn.groups[0]", func(x *bookkeeping.Txn) { x.Groups[0] = "tab\there" }},
		{"txn.groups[1]", func(x *bookkeeping.Txn) { x.Groups = append(x.Groups, x.Groups[0]) }},
		{"txn.prev_producer_id", func(x *bookkeeping.Txn) { x.PrevProducerID = -1 }},
		{"txn.next[0].topic_id", func(x *bookkeeping.Txn) { x.Next = []bookkeeping.TxnPartition{{Partition: 1}} }},
		{"txn.next[1]", func(x *bookkeeping.Txn) {
			x.Next = []bookkeeping.TxnPartition{{TopicID: "t", Partition: 1}, {TopicID: "t", Partition: 1}}
		}},
		{"txn.ended", func(x *bookkeeping.Txn) { x.Ended = 200 }},
		{"txn.version", func(x *bookkeeping.Txn) { x.Version = -1 }},
	} {
		x := openTxn(id, 1, 0)
		c.edit(&x)
		_, err := e.Transactions.PutTxn(e.ctx, x)
		wantValidation(t, fmt.Sprintf("PutTxn with a bad %s", c.field), err, c.field)
	}
	_, err := e.Transactions.GetTxn(e.ctx, id)
	wantErr(t, "GetTxn after refused PutTxns", err, bookkeeping.ErrNotFound)
	for _, c := range []struct {
		after string
		limit int
		field string
	}{{"", 0, "limit"}, {"", bookkeeping.MaxTxnListLimit + 1, "limit"}, {"a\x00b", 1, "after"}} {
		_, _, err := e.Transactions.ListTxns(e.ctx, c.after, c.limit)
		wantValidation(t, fmt.Sprintf("ListTxns(%q, %d)", c.after, c.limit), err, c.field)
	}
}
