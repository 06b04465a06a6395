package bookie

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// fakeLedgers is a catalog of ledger records for catalog GC.
type fakeLedgers map[catalog.LedgerID]catalog.LedgerMetadata

func (f fakeLedgers) GetLedger(_ context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	m, ok := f[id]
	if !ok {
		return m, fmt.Errorf("ledger %d: %w", id, catalog.ErrNotFound)
	}
	return m, nil
}

func onBookies(state catalog.LedgerState, bookies ...string) catalog.LedgerMetadata {
	return catalog.LedgerMetadata{State: state, Ensembles: []catalog.EnsembleSegment{{FirstEntry: 0, Bookies: bookies}}}
}

// A ledger this bookie holds is deleted once the catalog has had no use
// for its copy here for the grace — purged, offloaded, deleted, or naming
// other bookies — and kept while any segment names this bookie.
func TestCatalogGCDeletesCopiesNoLongerNeeded(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	for l := int64(1); l <= 6; l++ {
		addWait(t, b, l, 0, -1)
	}
	cat := fakeLedgers{
		1: onBookies(catalog.LedgerOpen, "bookie-1", "b2", "b3"),
		2: onBookies(catalog.LedgerClosed, "b2", "b3", "b4"), // moved off this bookie
		3: onBookies(catalog.LedgerOffloaded, "bookie-1", "b2", "b3"),
		// 4: purged
		5: onBookies(catalog.LedgerClosed, "b2", "b3", "b4"), // a copy the next pass will name
		6: {State: catalog.LedgerClosed, Ensembles: []catalog.EnsembleSegment{
			{FirstEntry: 0, Bookies: []string{"bookie-1", "b2", "b3"}}, {FirstEntry: 10, Bookies: []string{"b4", "b2", "b3"}}}},
	}
	now := time.Unix(1000, 0)
	gc := b.NewCatalogGC(cat, CatalogGCConfig{Grace: time.Hour, MaxPerPass: 4, Now: func() time.Time { return now }})
	pass := func() CatalogGCReport {
		t.Helper()
		var total CatalogGCReport
		for {
			r, err := gc.Pass(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			total.Checked += r.Checked
			total.Garbage += r.Garbage
			total.Deleted += r.Deleted
			if r.Guarded {
				t.Fatalf("guarded: %+v", r)
			}
			if r.Finished {
				return total
			}
		}
	}
	if r := pass(); r.Checked != 6 || r.Garbage != 4 || r.Deleted != 0 {
		t.Fatalf("first pass: %+v; want 6 checked, 4 garbage (2, 3, 4, 5), none deleted within the grace", r)
	}
	cat[5] = onBookies(catalog.LedgerClosed, "b2", "b3", "bookie-1") // re-replication named it
	now = now.Add(2 * time.Hour)
	if r := pass(); r.Deleted != 3 {
		t.Fatalf("after the grace: %+v; want 3 deleted (2, 3, 4)", r)
	}
	ids, err := b.st.ListLedgers(-1, 100)
	if err != nil || fmt.Sprint(ids) != "[1 5 6]" {
		t.Fatalf("ledgers left: %v, %v; want [1 5 6]", ids, err)
	}
}

// A bookie pointed at the wrong catalog finds most of its ledgers
// unknown: the pass deletes nothing and says so.
func TestCatalogGCGuardsAgainstTheWrongCatalog(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	for l := int64(1); l <= 20; l++ {
		addWait(t, b, l, 0, -1)
	}
	now := time.Unix(1000, 0)
	gc := b.NewCatalogGC(fakeLedgers{}, CatalogGCConfig{Grace: time.Minute, Now: func() time.Time { return now }})
	for range 2 {
		r, err := gc.Pass(context.Background())
		if err != nil || !r.Guarded || r.Deleted != 0 || r.Garbage != 20 {
			t.Fatalf("pass against an empty catalog: %+v, %v; want guarded, nothing deleted", r, err)
		}
		now = now.Add(time.Hour)
	}
	if ids, _ := b.st.ListLedgers(-1, 100); len(ids) != 20 {
		t.Fatalf("%d ledgers left, want all 20", len(ids))
	}
}
