package catalogtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runLedgers(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"CreateGet":           ledgersCreateGet,
		"GetMany":             ledgersGetMany,
		"IDsIncrease":         ledgersIDsIncrease,
		"CreateValidation":    ledgersCreateValidation,
		"UpdateCAS":           ledgersUpdateCAS,
		"IllegalUpdates":      ledgersIllegalUpdates,
		"Lifecycle":           ledgersLifecycle,
		"ListByPartition":     ledgersListByPartition,
		"ListByState":         ledgersListByState,
		"ListValidation":      ledgersListValidation,
		"DeleteRequiresState": ledgersDeleteRequiresState,
		"DamageMarks":         ledgersDamageMarks,
	})
}

// lease is a plausible writer lease; ledger calls do not check it.
func lease(partition int) catalog.WriterLease {
	return catalog.WriterLease{Topic: "t", TopicID: "00000000000000000000000000000001", Partition: partition, Owner: "ingest-a", Epoch: 3}
}

func ledgersCreateGet(e *env) {
	s := spec(lease(2), 1000)
	m, err := e.b.CreateLedger(e.ctx, s)
	if err != nil {
		e.t.Fatalf("CreateLedger: %v", err)
	}
	want := catalog.NewLedger(s, m.ID, Start)
	if m.ID < 1 || !ledgerEqual(m, want) {
		e.t.Fatalf("CreateLedger = %+v, want %+v", m, want)
	}
	if m.State != catalog.LedgerOpen || m.LastEntry != -1 || m.LastOffset != 999 || m.Version != 1 {
		e.t.Fatalf("a new ledger is %+v, want OPEN, last entry -1, last offset 999, version 1", m)
	}
	if got := e.getLedger(m.ID); !ledgerEqual(got, m) {
		e.t.Fatalf("GetLedger = %+v, want %+v", got, m)
	}
	_, err = e.b.GetLedger(e.ctx, m.ID+1)
	wantErr(e.t, err, catalog.ErrNotFound, "GetLedger of an unallocated id")
}

// GetLedgers answers as GetLedger would, for many ids at once: those that
// exist, once each, in id order, over more than one backend request's worth
// (DynamoDB's BatchGetItem takes 100 keys).
func ledgersGetMany(e *env) {
	var made []catalog.LedgerMetadata
	for i := range 120 {
		made = append(made, e.ledgerFor(lease(i%3), int64(i)))
	}
	// Change one, so the answer must be the stored record, not the first.
	upd := made[7]
	upd.State = catalog.LedgerClosed
	upd.LastEntry, upd.LastOffset = -1, upd.FirstOffset-1
	upd, err := e.b.UpdateLedger(e.ctx, upd)
	if err != nil {
		e.t.Fatalf("UpdateLedger: %v", err)
	}
	made[7] = upd
	var ids []catalog.LedgerID
	for i := len(made) - 1; i >= 0; i-- { // reversed, and some twice
		ids = append(ids, made[i].ID)
		if i%10 == 0 {
			ids = append(ids, made[i].ID)
		}
	}
	ids = append(ids, made[len(made)-1].ID+1000, 0) // never allocated
	got, err := e.b.GetLedgers(e.ctx, ids)
	if err != nil {
		e.t.Fatalf("GetLedgers: %v", err)
	}
	if len(got) != len(made) {
		e.t.Fatalf("GetLedgers returned %d ledgers, want %d", len(got), len(made))
	}
	for i, m := range got {
		if !ledgerEqual(m, made[i]) || m.Version != made[i].Version {
			e.t.Fatalf("GetLedgers[%d] = %+v, want %+v", i, m, made[i])
		}
	}
	if got, err := e.b.GetLedgers(e.ctx, nil); err != nil || len(got) != 0 {
		e.t.Fatalf("GetLedgers(nil) = %v, %v; want nothing", got, err)
	}
	_, err = e.b.GetLedgers(e.ctx, make([]catalog.LedgerID, catalog.MaxPageSize+1))
	wantInvalid(e.t, err, "ids", "GetLedgers of too many ids")
}

func ledgersIDsIncrease(e *env) {
	var prev catalog.LedgerID
	for i := range 5 {
		m := e.ledgerFor(lease(i%2), 0)
		if m.ID <= prev {
			e.t.Fatalf("ledger %d got id %d after %d; ids must increase", i, m.ID, prev)
		}
		prev = m.ID
	}
}

func ledgersCreateValidation(e *env) {
	good := spec(lease(0), 0)
	mod := func(f func(s *catalog.LedgerSpec)) catalog.LedgerSpec {
		s := good
		s.Ensemble = slices.Clone(good.Ensemble)
		f(&s)
		return s
	}
	cases := []struct {
		s     catalog.LedgerSpec
		field string
	}{
		{mod(func(s *catalog.LedgerSpec) { s.Topic = "" }), "name"},
		{mod(func(s *catalog.LedgerSpec) { s.TopicID = "" }), "topicID"},
		{mod(func(s *catalog.LedgerSpec) { s.Partition = -1 }), "partition"},
		{mod(func(s *catalog.LedgerSpec) { s.Replication.WriteQuorum = 4 }), "replication.writeQuorum"},
		{mod(func(s *catalog.LedgerSpec) { s.Replication.AckQuorum = 0 }), "replication.ackQuorum"},
		{mod(func(s *catalog.LedgerSpec) { s.Ensemble = s.Ensemble[:2] }), "ensembles"},
		{mod(func(s *catalog.LedgerSpec) { s.Ensemble[2] = s.Ensemble[0] }), "ensembles"},
		{mod(func(s *catalog.LedgerSpec) { s.FirstOffset = -1 }), "firstOffset"},
		{mod(func(s *catalog.LedgerSpec) { s.WriterOwner = "" }), "writerOwner"},
		{mod(func(s *catalog.LedgerSpec) { s.WriterEpoch = 0 }), "writerEpoch"},
	}
	for _, c := range cases {
		_, err := e.b.CreateLedger(e.ctx, c.s)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("CreateLedger(%+v)", c.s))
	}
	page, err := e.b.ListLedgersByState(e.ctx, catalog.LedgerOpen, "", 0)
	if err != nil || len(page.Items) != 0 {
		e.t.Fatalf("refused creates stored ledgers: %+v, %v", page.Items, err)
	}
}

func ledgersUpdateCAS(e *env) {
	m := e.ledgerFor(lease(0), 0)
	// Ensemble change: bookie-2 failed at entry 10.
	change := m
	change.Ensembles = append(slices.Clone(m.Ensembles), catalog.EnsembleSegment{FirstEntry: 10, Bookies: []string{"bookie-1:3181", "bookie-4:3181", "bookie-3:3181"}})
	got := e.updateLedger(change)
	want := change
	want.Version = 2
	if !ledgerEqual(got, want) || !ledgerEqual(e.getLedger(m.ID), want) {
		e.t.Fatalf("UpdateLedger = %+v, want %+v", got, want)
	}

	// The same proposal again is now stale.
	_, err := e.b.UpdateLedger(e.ctx, change)
	wantErr(e.t, err, catalog.ErrVersionConflict, "UpdateLedger with a stale version")

	// The last segment may be replaced in place (no entry went to it yet).
	replace := got
	replace.Ensembles = slices.Clone(got.Ensembles)
	replace.Ensembles[1] = catalog.EnsembleSegment{FirstEntry: 10, Bookies: []string{"bookie-1:3181", "bookie-5:3181", "bookie-3:3181"}}
	if got = e.updateLedger(replace); got.Version != 3 || got.Ensembles[1].Bookies[1] != "bookie-5:3181" {
		e.t.Fatalf("in-place replacement of the last segment = %+v", got)
	}

	missing := got
	missing.ID += 1000
	_, err = e.b.UpdateLedger(e.ctx, missing)
	wantErr(e.t, err, catalog.ErrNotFound, "UpdateLedger of a missing ledger")
}

func ledgersIllegalUpdates(e *env) {
	m := e.ledgerFor(lease(0), 0)
	cases := []struct {
		f     func(m *catalog.LedgerMetadata)
		field string
	}{
		{func(m *catalog.LedgerMetadata) { m.State = catalog.LedgerOffloaded; m.Location = "s3://b/k" }, "state"},
		{func(m *catalog.LedgerMetadata) { m.State = catalog.LedgerDeleted }, "state"},
		{func(m *catalog.LedgerMetadata) { m.State = 0 }, "state"},
		{func(m *catalog.LedgerMetadata) { m.FirstOffset = 7 }, "firstOffset"},
		{func(m *catalog.LedgerMetadata) { m.Partition = 1 }, "topic"},
		{func(m *catalog.LedgerMetadata) { m.Replication.AckQuorum = 3 }, "replication"},
		{func(m *catalog.LedgerMetadata) { m.WriterEpoch++ }, "writer"},
		{func(m *catalog.LedgerMetadata) { m.Ensembles = nil }, "ensembles"},
		{func(m *catalog.LedgerMetadata) {
			m.Ensembles = []catalog.EnsembleSegment{{FirstEntry: 0, Bookies: []string{"x:1", "y:1", "z:1"}}, {FirstEntry: 0, Bookies: []string{"x:1", "y:1", "w:1"}}}
		}, "ensembles"},
		{func(m *catalog.LedgerMetadata) { m.LastEntry = -2 }, "lastEntry"},
		{func(m *catalog.LedgerMetadata) { m.LastEntry = 5 }, "lastOffset"},
		{func(m *catalog.LedgerMetadata) { m.Location = "s3://b/k" }, "location"},
	}
	for i, c := range cases {
		p := m
		p.Ensembles = slices.Clone(m.Ensembles)
		c.f(&p)
		_, err := e.b.UpdateLedger(e.ctx, p)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("illegal update %d", i))
	}
	if got := e.getLedger(m.ID); !ledgerEqual(got, m) {
		e.t.Fatalf("illegal updates changed the ledger: %+v", got)
	}
}

func ledgersLifecycle(e *env) {
	m := e.ledgerFor(lease(0), 500)
	m.State = catalog.LedgerInRecovery
	m = e.updateLedger(m)

	e.clk.Advance(3 * time.Second)
	m.State, m.LastEntry, m.LastOffset = catalog.LedgerClosed, 41, 599
	m = e.updateLedger(m)
	if !m.ClosedAt.Equal(Start.Add(3*time.Second)) || m.Version != 3 {
		e.t.Fatalf("closed ledger = %+v, want closed at %v, version 3", m, Start.Add(3*time.Second))
	}
	sealed := m
	sealed.State, sealed.Location = catalog.LedgerOffloaded, "s3://segments/t/0/00001"
	sealed.LastEntry = 50
	_, err := e.b.UpdateLedger(e.ctx, sealed)
	wantInvalid(e.t, err, "lastEntry", "changing a closed ledger's last entry")
	reopen := m
	reopen.State = catalog.LedgerOpen
	_, err = e.b.UpdateLedger(e.ctx, reopen)
	wantInvalid(e.t, err, "state", "reopening a closed ledger")
	noLoc := m
	noLoc.State = catalog.LedgerOffloaded
	_, err = e.b.UpdateLedger(e.ctx, noLoc)
	wantInvalid(e.t, err, "location", "OFFLOADED without a location")

	m.State, m.Location = catalog.LedgerOffloaded, "s3://segments/t/0/00001"
	e.clk.Advance(time.Second)
	m = e.updateLedger(m)
	if m.Location != "s3://segments/t/0/00001" || !m.ClosedAt.Equal(Start.Add(3*time.Second)) {
		e.t.Fatalf("offloaded ledger = %+v", m)
	}
	m.State = catalog.LedgerDeleted
	m = e.updateLedger(m)
	for _, s := range []catalog.LedgerState{catalog.LedgerOpen, catalog.LedgerClosed, catalog.LedgerOffloaded, catalog.LedgerDeleted} {
		p := m
		p.State = s
		_, err := e.b.UpdateLedger(e.ctx, p)
		wantInvalid(e.t, err, "state", "leaving DELETED for "+s.String())
	}
	if got := e.getLedger(m.ID); !ledgerEqual(got, m) || got.Version != 5 {
		e.t.Fatalf("GetLedger = %+v, want %+v", got, m)
	}

	wantErr(e.t, e.b.DeleteLedgerMetadata(e.ctx, m.ID, m.Version-1), catalog.ErrVersionConflict, "DeleteLedgerMetadata with a stale version")
	if err := e.b.DeleteLedgerMetadata(e.ctx, m.ID, m.Version); err != nil {
		e.t.Fatalf("DeleteLedgerMetadata: %v", err)
	}
	_, err = e.b.GetLedger(e.ctx, m.ID)
	wantErr(e.t, err, catalog.ErrNotFound, "GetLedger after DeleteLedgerMetadata")
	wantErr(e.t, e.b.DeleteLedgerMetadata(e.ctx, m.ID, m.Version), catalog.ErrNotFound, "DeleteLedgerMetadata twice")
	for _, s := range []catalog.LedgerState{catalog.LedgerDeleted, catalog.LedgerOffloaded} {
		if ids := listByState(e, s, 0); len(ids) != 0 {
			e.t.Fatalf("%v still lists %v after the metadata was removed", s, ids)
		}
	}
	if ids := listByPartition(e, lease(0).TopicID, 0, 0); len(ids) != 0 {
		e.t.Fatalf("the partition still lists %v after the metadata was removed", ids)
	}
}

func ledgersListByPartition(e *env) {
	var p0, p1 []catalog.LedgerID
	for i := range 9 {
		m := e.ledgerFor(lease(i%2), 0)
		if i%2 == 0 {
			p0 = append(p0, m.ID)
		} else {
			p1 = append(p1, m.ID)
		}
	}
	other := lease(0)
	other.TopicID = "00000000000000000000000000000002"
	e.ledgerFor(other, 0)

	if got := listByPartition(e, lease(0).TopicID, 0, 2); !slices.Equal(got, p0) {
		e.t.Fatalf("partition 0 lists %v, want %v", got, p0)
	}
	if got := listByPartition(e, lease(0).TopicID, 1, 3); !slices.Equal(got, p1) {
		e.t.Fatalf("partition 1 lists %v, want %v", got, p1)
	}
	if got := listByPartition(e, lease(0).TopicID, 2, 0); len(got) != 0 {
		e.t.Fatalf("partition 2 lists %v, want none", got)
	}
}

func ledgersListByState(e *env) {
	var all []catalog.LedgerMetadata
	for i := range 6 {
		all = append(all, e.ledgerFor(lease(i%3), 0))
	}
	var closed, open []catalog.LedgerID
	for i, m := range all {
		if i%3 == 1 {
			m.State = catalog.LedgerClosed
			e.updateLedger(m)
			closed = append(closed, m.ID)
		} else {
			open = append(open, m.ID)
		}
	}
	if got := listByState(e, catalog.LedgerOpen, 1); !slices.Equal(got, open) {
		e.t.Fatalf("OPEN lists %v, want %v", got, open)
	}
	if got := listByState(e, catalog.LedgerClosed, 0); !slices.Equal(got, closed) {
		e.t.Fatalf("CLOSED lists %v, want %v", got, closed)
	}
	if got := listByState(e, catalog.LedgerOffloaded, 5); len(got) != 0 {
		e.t.Fatalf("OFFLOADED lists %v, want none", got)
	}
	page, err := e.b.ListLedgersByState(e.ctx, catalog.LedgerClosed, "", 0)
	if err != nil || len(page.Items) != 2 || page.Items[0].State != catalog.LedgerClosed || page.Items[0].Version != 2 {
		e.t.Fatalf("ListLedgersByState returned %+v, %v; want the full closed records", page.Items, err)
	}
}

func ledgersListValidation(e *env) {
	_, err := e.b.ListLedgersByState(e.ctx, 0, "", 0)
	wantInvalid(e.t, err, "state", "ListLedgersByState(0)")
	_, err = e.b.ListLedgersByState(e.ctx, catalog.LedgerOpen, "", catalog.MaxPageSize+1)
	wantInvalid(e.t, err, "limit", "ListLedgersByState with a huge limit")
	_, err = e.b.ListLedgersByState(e.ctx, catalog.LedgerOpen, "%%%", 1)
	wantInvalid(e.t, err, "pageToken", "ListLedgersByState with a bad token")
	_, err = e.b.ListLedgersByPartition(e.ctx, "", 0, "", 1)
	wantInvalid(e.t, err, "topicID", "ListLedgersByPartition with no topic id")
	_, err = e.b.ListLedgersByPartition(e.ctx, "abc", -1, "", 1)
	wantInvalid(e.t, err, "partition", "ListLedgersByPartition(-1)")
}

func ledgersDeleteRequiresState(e *env) {
	m := e.ledgerFor(lease(0), 0)
	wantInvalid(e.t, e.b.DeleteLedgerMetadata(e.ctx, m.ID, m.Version), "state", "DeleteLedgerMetadata of an OPEN ledger")
	if got := e.getLedger(m.ID); !ledgerEqual(got, m) {
		e.t.Fatalf("a refused delete changed the ledger: %+v", got)
	}
	wantErr(e.t, e.b.DeleteLedgerMetadata(e.ctx, m.ID+1000, 1), catalog.ErrNotFound, "DeleteLedgerMetadata of a missing ledger")
}

func listByState(e *env, s catalog.LedgerState, limit int) []catalog.LedgerID {
	e.t.Helper()
	return collect(e, func(token string) (catalog.Page[catalog.LedgerMetadata], error) {
		return e.b.ListLedgersByState(e.ctx, s, token, limit)
	}, limit)
}

func listByPartition(e *env, id catalog.TopicID, partition, limit int) []catalog.LedgerID {
	e.t.Helper()
	return collect(e, func(token string) (catalog.Page[catalog.LedgerMetadata], error) {
		return e.b.ListLedgersByPartition(e.ctx, id, partition, token, limit)
	}, limit)
}

// collect pages through a ledger listing, checking each page's bound.
func collect(e *env, list func(token string) (catalog.Page[catalog.LedgerMetadata], error), limit int) []catalog.LedgerID {
	e.t.Helper()
	if limit == 0 {
		limit = catalog.DefaultPageSize
	}
	var ids []catalog.LedgerID
	token := ""
	for range 100 {
		page, err := list(token)
		if err != nil {
			e.t.Fatalf("listing ledgers: %v", err)
		}
		if len(page.Items) > limit {
			e.t.Fatalf("a page has %d ledgers, limit %d", len(page.Items), limit)
		}
		for _, m := range page.Items {
			ids = append(ids, m.ID)
		}
		if token = page.NextPageToken; token == "" {
			return ids
		}
	}
	e.t.Fatal("ledger listing does not terminate")
	return nil
}

func ledgerEqual(a, b catalog.LedgerMetadata) bool {
	return a.ID == b.ID && a.Topic == b.Topic && a.TopicID == b.TopicID && a.Partition == b.Partition &&
		a.Replication == b.Replication && slices.EqualFunc(a.Ensembles, b.Ensembles, func(x, y catalog.EnsembleSegment) bool {
		return x.FirstEntry == y.FirstEntry && slices.Equal(x.Bookies, y.Bookies)
	}) && slices.EqualFunc(a.Damaged, b.Damaged, func(x, y catalog.DamagedCopy) bool {
		return x.Bookie == y.Bookie && x.Entry == y.Entry && x.Reason == y.Reason && x.At.Equal(y.At)
	}) && a.State == b.State && a.LastEntry == b.LastEntry && a.FirstOffset == b.FirstOffset &&
		a.LastOffset == b.LastOffset && a.Location == b.Location && a.WriterOwner == b.WriterOwner &&
		a.WriterEpoch == b.WriterEpoch && a.CreatedAt.Equal(b.CreatedAt) && a.ClosedAt.Equal(b.ClosedAt) && a.Version == b.Version
}

// A CLOSED ledger's damage marks are stored and read back as written
// (report time to the millisecond); bad marks are refused; the store
// drops a mark once its bookie is moved off the ledger, and every mark
// when the ledger leaves CLOSED.
func ledgersDamageMarks(e *env) {
	m := e.ledgerFor(lease(1), 0)
	at := Start.Add(1500*time.Microsecond + 7*time.Second)
	mark := catalog.DamagedCopy{Bookie: "bookie-2:3181", Entry: 4, Reason: catalog.DamageMissing, At: at}
	open := m
	open.Damaged = []catalog.DamagedCopy{mark}
	if got := e.updateLedger(open); len(got.Damaged) != 0 {
		e.t.Fatalf("an OPEN ledger kept damage marks: %+v", got.Damaged)
	}
	m = e.getLedger(m.ID)
	m.State, m.LastEntry, m.LastOffset = catalog.LedgerClosed, 9, 99
	m = e.updateLedger(m)

	bad := []struct {
		d    catalog.DamagedCopy
		what string
	}{
		{catalog.DamagedCopy{Bookie: "bookie-2:3181", Entry: 10, Reason: catalog.DamageMissing, At: at}, "an entry past the last"},
		{catalog.DamagedCopy{Bookie: "bookie-2:3181", Entry: -1, Reason: catalog.DamageMissing, At: at}, "a negative entry"},
		{catalog.DamagedCopy{Bookie: "bookie-2:3181", Entry: 1, Reason: "rot", At: at}, "an unknown reason"},
		{catalog.DamagedCopy{Bookie: "bookie-2:3181", Entry: 1, Reason: catalog.DamageChecksum}, "no report time"},
		{catalog.DamagedCopy{Bookie: "", Entry: 1, Reason: catalog.DamageChecksum, At: at}, "no bookie"},
	}
	for _, c := range bad {
		p := m
		p.Damaged = []catalog.DamagedCopy{c.d}
		_, err := e.b.UpdateLedger(e.ctx, p)
		wantInvalid(e.t, err, "damaged", c.what)
	}
	twice := m
	twice.Damaged = []catalog.DamagedCopy{mark, mark}
	_, err := e.b.UpdateLedger(e.ctx, twice)
	wantInvalid(e.t, err, "damaged", "one bookie marked twice")

	m.Damaged = []catalog.DamagedCopy{mark,
		{Bookie: "bookie-3:3181", Entry: 9, Reason: catalog.DamageChecksum, At: at},
		{Bookie: "bookie-9:3181", Entry: 0, Reason: catalog.DamageChecksum, At: at}} // not in the ledger: dropped
	m = e.updateLedger(m)
	want := []catalog.DamagedCopy{mark, {Bookie: "bookie-3:3181", Entry: 9, Reason: catalog.DamageChecksum, At: at}}
	for i := range want {
		want[i].At = catalog.Timestamp(at)
	}
	check := func(what string, got []catalog.DamagedCopy, want []catalog.DamagedCopy) {
		e.t.Helper()
		a, b := m, m
		a.Damaged, b.Damaged = got, want
		if !ledgerEqual(a, b) {
			e.t.Fatalf("%s: damage marks %+v, want %+v", what, got, want)
		}
	}
	check("UpdateLedger", m.Damaged, want)
	check("GetLedger", e.getLedger(m.ID).Damaged, want)
	if d, ok := m.DamagedOn("bookie-3:3181"); !ok || d.Reason != catalog.DamageChecksum {
		e.t.Fatalf("DamagedOn(bookie-3) = %+v, %v", d, ok)
	}

	// A replica move of bookie-2's position to bookie-4: its mark goes.
	moved := m
	moved.Ensembles = []catalog.EnsembleSegment{{FirstEntry: 0, Bookies: []string{"bookie-1:3181", "bookie-4:3181", "bookie-3:3181"}}}
	m = e.updateLedger(moved)
	check("after the move", m.Damaged, want[1:])
	check("GetLedger after the move", e.getLedger(m.ID).Damaged, want[1:])

	m.State, m.Location = catalog.LedgerOffloaded, "s3://segments/t/1/00001"
	m = e.updateLedger(m)
	check("offloaded", e.getLedger(m.ID).Damaged, nil)
}
