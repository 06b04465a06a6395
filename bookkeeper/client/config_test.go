package client

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Validate reports every violation at once; the zero value with the two
// catalogs is valid.
func TestConfigValidate(t *testing.T) {
	err := Config{
		TickInterval: time.Hour, AddTimeout: -1, CASRetries: -1, ReadAhead: 1 << 20, MaxInFlight: -5,
		MaxAddBatch: MaxMaxAddBatch + 1, MaxAddBatchBytes: 9 << 20, // above the default MaxEntryBytes
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, field := range []string{"Ledgers", "Bookies", "TickInterval", "AddTimeout", "CASRetries", "ReadAhead", "MaxInFlight", "MaxAddBatch:", "MaxAddBatchBytes:"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	cl := newCluster(t, 0)
	if err := (Config{Ledgers: cl.cat, Bookies: cl.cat}).Validate(); err != nil {
		t.Fatalf("zero config with catalogs: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

// The master key depends only on the ledger id and its writer's lease —
// immutable catalog fields — so a recovering client derives the same one.
func TestMasterKey(t *testing.T) {
	m := catalog.LedgerMetadata{ID: 7, WriterOwner: "ingest-1", WriterEpoch: 3, State: catalog.LedgerOpen, Version: 1}
	k := MasterKey(m)
	if len(k) != 20 {
		t.Fatalf("key of %d bytes", len(k))
	}
	later := m
	later.State, later.LastEntry, later.Version = catalog.LedgerInRecovery, 10, 5
	later.Ensembles = []catalog.EnsembleSegment{{Bookies: []string{"b9"}}}
	if !bytes.Equal(MasterKey(later), k) {
		t.Fatal("key changed with mutable fields")
	}
	for _, other := range []catalog.LedgerMetadata{
		{ID: 8, WriterOwner: "ingest-1", WriterEpoch: 3},
		{ID: 7, WriterOwner: "ingest-2", WriterEpoch: 3},
		{ID: 7, WriterOwner: "ingest-1", WriterEpoch: 4},
	} {
		if bytes.Equal(MasterKey(other), k) {
			t.Fatalf("key of %+v equals %+v's", other, m)
		}
	}
}
