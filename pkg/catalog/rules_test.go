package catalog_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

var states = []catalog.LedgerState{catalog.LedgerOpen, catalog.LedgerInRecovery, catalog.LedgerClosed, catalog.LedgerOffloaded, catalog.LedgerDeleted}

// TestLedgerTransitions pins the whole state machine (DESIGN §2.1).
func TestLedgerTransitions(t *testing.T) {
	legal := map[[2]catalog.LedgerState]bool{
		{catalog.LedgerOpen, catalog.LedgerOpen}:             true,
		{catalog.LedgerOpen, catalog.LedgerInRecovery}:       true,
		{catalog.LedgerOpen, catalog.LedgerClosed}:           true,
		{catalog.LedgerInRecovery, catalog.LedgerInRecovery}: true,
		{catalog.LedgerInRecovery, catalog.LedgerClosed}:     true,
		{catalog.LedgerClosed, catalog.LedgerClosed}:         true, // replica moves only
		{catalog.LedgerClosed, catalog.LedgerOffloaded}:      true,
		{catalog.LedgerClosed, catalog.LedgerDeleted}:        true,
		{catalog.LedgerOffloaded, catalog.LedgerOffloaded}:   true,
		{catalog.LedgerOffloaded, catalog.LedgerDeleted}:     true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := catalog.LegalTransition(from, to); got != legal[[2]catalog.LedgerState{from, to}] {
				t.Errorf("%v → %v legal = %v", from, to, got)
			}
		}
	}
}

// Re-replication may move a CLOSED ledger's replicas — the same segments,
// each from the same entry, E distinct bookies each — and nothing else:
// not an OPEN ledger's earlier segments (its writer owns the chain), not an
// OFFLOADED ledger's, not the end, and never a segment added or dropped.
func TestNextLedgerReplicaMoves(t *testing.T) {
	t0 := time.UnixMilli(1_000_000).UTC()
	m := catalog.NewLedger(catalog.LedgerSpec{Topic: "t", TopicID: "id", Replication: catalog.DefaultReplication,
		Ensemble: []string{"a:1", "b:1", "c:1"}, FirstOffset: 10, WriterOwner: "w", WriterEpoch: 1}, 7, t0)
	open := m
	open.Ensembles = append(open.Ensembles, catalog.EnsembleSegment{FirstEntry: 5, Bookies: []string{"a:1", "d:1", "c:1"}})
	open.LastEntry, open.LastOffset = 9, 29
	p := open
	p.State = catalog.LedgerClosed
	closed, err := catalog.NextLedger(open, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	moved := func(from catalog.LedgerMetadata, edit func(*catalog.LedgerMetadata)) (catalog.LedgerMetadata, error) {
		p := from
		p.Ensembles = []catalog.EnsembleSegment{}
		for _, seg := range from.Ensembles {
			p.Ensembles = append(p.Ensembles, catalog.EnsembleSegment{FirstEntry: seg.FirstEntry, Bookies: append([]string(nil), seg.Bookies...)})
		}
		edit(&p)
		return catalog.NextLedger(from, p, t0.Add(time.Hour))
	}
	// a:1 is lost: both segments move its copies to e:1.
	got, err := moved(closed, func(p *catalog.LedgerMetadata) { p.Ensembles[0].Bookies[0], p.Ensembles[1].Bookies[0] = "e:1", "e:1" })
	if err != nil {
		t.Fatalf("replica move refused: %v", err)
	}
	if got.Version != closed.Version+1 || got.Ensembles[0].Bookies[0] != "e:1" || !got.ClosedAt.Equal(closed.ClosedAt) || got.LastEntry != 9 {
		t.Fatalf("after the move: %+v", got)
	}
	for name, tc := range map[string]struct {
		from catalog.LedgerMetadata
		edit func(*catalog.LedgerMetadata)
	}{
		"twice in a segment": {closed, func(p *catalog.LedgerMetadata) { p.Ensembles[0].Bookies[0] = "b:1" }},
		"positions swapped": {closed, func(p *catalog.LedgerMetadata) {
			p.Ensembles[0].Bookies[0], p.Ensembles[0].Bookies[1] = p.Ensembles[0].Bookies[1], p.Ensembles[0].Bookies[0]
		}},
		"segment added": {closed, func(p *catalog.LedgerMetadata) {
			p.Ensembles = append(p.Ensembles, p.Ensembles[1])
			p.Ensembles[2].FirstEntry = 8
		}},
		"segment dropped":              {closed, func(p *catalog.LedgerMetadata) { p.Ensembles = p.Ensembles[:1] }},
		"first entry moved":            {closed, func(p *catalog.LedgerMetadata) { p.Ensembles[1].FirstEntry = 6 }},
		"end moved too":                {closed, func(p *catalog.LedgerMetadata) { p.Ensembles[0].Bookies[0] = "e:1"; p.LastEntry, p.LastOffset = 8, 28 }},
		"open ledger, earlier segment": {open, func(p *catalog.LedgerMetadata) { p.Ensembles[0].Bookies[0] = "e:1" }},
		"closing and moving at once": {open, func(p *catalog.LedgerMetadata) {
			p.State = catalog.LedgerClosed
			p.Ensembles[0].Bookies[0] = "e:1"
		}},
	} {
		if _, err := moved(tc.from, tc.edit); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	off := closed
	off.State, off.Location = catalog.LedgerOffloaded, "s3://b/k"
	offloaded, err := catalog.NextLedger(closed, off, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := moved(offloaded, func(p *catalog.LedgerMetadata) { p.Ensembles[0].Bookies[0] = "e:1" }); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("offloaded ledger's replicas moved: %v", err)
	}
}

func TestLedgerStateNames(t *testing.T) {
	for _, s := range states {
		got, err := catalog.ParseLedgerState(s.String())
		if err != nil || got != s {
			t.Errorf("ParseLedgerState(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := catalog.ParseLedgerState("open"); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("ParseLedgerState(open): %v, want invalid (names are exact)", err)
	}
	if catalog.LedgerState(0).Valid() || catalog.LedgerState(6).Valid() {
		t.Error("0 and 6 are not states")
	}
}

func TestNextLedgerStampsCloseTimeOnce(t *testing.T) {
	t0 := time.UnixMilli(1_000_000).UTC()
	m := catalog.NewLedger(catalog.LedgerSpec{Topic: "t", TopicID: "id", Replication: catalog.DefaultReplication,
		Ensemble: []string{"a:1", "b:1", "c:1"}, FirstOffset: 10, WriterOwner: "w", WriterEpoch: 1}, 7, t0)
	p := m
	p.State, p.LastEntry, p.LastOffset = catalog.LedgerClosed, 3, 19
	p.CreatedAt = time.Time{} // store-maintained: ignored
	closed, err := catalog.NextLedger(m, p, t0.Add(time.Second+time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	if !closed.ClosedAt.Equal(t0.Add(time.Second)) || !closed.CreatedAt.Equal(t0) || closed.Version != 2 {
		t.Fatalf("closed = %+v", closed)
	}
	p = closed
	p.State, p.Location = catalog.LedgerOffloaded, "s3://b/k"
	off, err := catalog.NextLedger(closed, p, t0.Add(time.Hour))
	if err != nil || !off.ClosedAt.Equal(closed.ClosedAt) {
		t.Fatalf("offload moved the close time: %+v, %v", off, err)
	}
}

func TestAppendedLedgerBoundsTheChain(t *testing.T) {
	p := catalog.Partition{Topic: "t", TopicID: "id", Owner: "w", Epoch: 1}
	l := p.Lease()
	var err error
	for i := 1; i <= catalog.MaxLedgersPerPartition; i++ {
		if p, err = catalog.AppendedLedger(p, l, catalog.LedgerRef{ID: catalog.LedgerID(i), FirstOffset: int64(i)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	_, err = catalog.AppendedLedger(p, l, catalog.LedgerRef{ID: catalog.MaxLedgersPerPartition + 1, FirstOffset: 1 << 20})
	if !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("append past the bound: %v, want ErrLimitExceeded", err)
	}
	if p.Version != catalog.MaxLedgersPerPartition {
		t.Fatalf("version = %d", p.Version)
	}
}

func TestAppendedLedgerDoesNotAliasTheInput(t *testing.T) {
	p := catalog.Partition{Topic: "t", TopicID: "id", Owner: "w", Epoch: 1, Ledgers: make([]catalog.LedgerRef, 1, 8)}
	p.Ledgers[0] = catalog.LedgerRef{ID: 1}
	a, _ := catalog.AppendedLedger(p, p.Lease(), catalog.LedgerRef{ID: 2})
	b, _ := catalog.AppendedLedger(p, p.Lease(), catalog.LedgerRef{ID: 3})
	if a.Ledgers[1].ID != 2 || b.Ledgers[1].ID != 3 {
		t.Fatalf("appends share a backing array: %v %v", a.Ledgers, b.Ledgers)
	}
}

func TestCheckLeaseFencesEveryField(t *testing.T) {
	p := catalog.Partition{Topic: "t", TopicID: "id", Index: 2, Owner: "w", Epoch: 5}
	if err := catalog.CheckLease(p, p.Lease()); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(l *catalog.WriterLease){
		"epoch":   func(l *catalog.WriterLease) { l.Epoch-- },
		"owner":   func(l *catalog.WriterLease) { l.Owner = "x" },
		"topicID": func(l *catalog.WriterLease) { l.TopicID = "other" },
	} {
		l := p.Lease()
		mod(&l)
		if err := catalog.CheckLease(p, l); !errors.Is(err, catalog.ErrFenced) {
			t.Errorf("stale %s: %v, want ErrFenced", name, err)
		}
	}
	free := p
	free.Owner = ""
	if err := catalog.CheckLease(free, catalog.WriterLease{TopicID: "id", Epoch: 5}); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("lease on a free partition: %v, want ErrFenced", err)
	}
}
