package compactor

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// txnBatch encodes recs as one transactional batch of producer pid at base.
func txnBatch(t testing.TB, base, pid int64, recs []kv) []byte {
	t.Helper()
	return kvBatchWith(t, base, record.BuilderOptions{Transactional: true, Producer: &record.Producer{ID: pid, Epoch: 0, BaseSequence: 0}}, recs)
}

// markerBatch is producer pid's commit or abort marker at offset.
func markerBatch(t testing.TB, offset, pid int64, commit bool) []byte {
	t.Helper()
	out, err := record.BuildMarker(record.Marker{ProducerID: pid, ProducerEpoch: 1, Commit: commit, Timestamp: 1_700_000_000_000 + offset})
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out, offset)
	return out
}

// describeChain lists the offloaded ledgers' records as
// "OFFSET:KEY=VALUE" ("OFFSET:marker(PID)" for a marker), with "txn(PID)"
// before the records of a transactional batch.
func (e *env) describeChain(topic string) string {
	e.t.Helper()
	p, err := e.cat.GetPartition(e.ctx(), topic, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	it := record.NewIterator(record.Limits{})
	for _, r := range p.Ledgers {
		m := e.get(r.ID)
		if m.State != catalog.LedgerOffloaded {
			continue
		}
		data, err := e.bucket.ReadAll(e.ctx(), m.Location)
		if err != nil {
			e.t.Fatal(err)
		}
		sr, err := segment.Open(bytes.NewReader(data), int64(len(data)), segment.ReaderOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		raw, _ := sr.ReadRange(sr.All(), nil)
		bi := sr.Batches(sr.All(), raw)
		for bi.Next() {
			b := record.Batch(bi.Batch())
			if b.Attributes().Control() {
				out = append(out, fmt.Sprintf("%d:marker(%d)", b.BaseOffset(), b.ProducerID()))
				continue
			}
			if b.Attributes().Transactional() {
				out = append(out, fmt.Sprintf("txn(%d)", b.ProducerID()))
			}
			if err := it.Reset(b); err != nil {
				e.t.Fatal(err)
			}
			for it.Next() {
				out = append(out, fmt.Sprintf("%d:%s=%s", it.Record().Offset, it.Record().Key, it.Record().Value))
			}
		}
	}
	return strings.Join(out, " ")
}

// Key compaction with transactions: an aborted transaction's records go
// (and supersede nothing), a committed one's count like any record,
// markers stay as stored, and a transaction whose marker is not in the
// compacted run (here: in the tail ledger) is kept as stored, headers and
// all, without superseding older records of its keys — it could still
// abort.
func TestKeyCompactionKeepsTransactionsRight(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	cfg.CleanupPolicy = catalog.CleanupCompact
	e.topic("state", cfg)
	k := func(key, value string) kv { return kv{[]byte(key), []byte(value)} }
	e.ledgerOf("state", 0, 6, [][]byte{
		kvBatch(t, 0, []kv{k("k1", "v0"), k("k4", "keep")}),
		txnBatch(t, 2, 7, []kv{k("k1", "aborted"), k("k2", "aborted")}),
		markerBatch(t, 4, 7, false),
		txnBatch(t, 5, 8, []kv{k("k1", "committed")}),
		markerBatch(t, 6, 8, true),
	})
	e.ledgerOf("state", 7, 10, [][]byte{
		kvBatch(t, 7, []kv{k("k3", "old")}),
		txnBatch(t, 8, 9, []kv{k("k2", "open"), k("k4", "open")}),
		kvBatch(t, 10, []kv{k("k3", "x")}),
	})
	e.ledgerOf("state", 11, 11, [][]byte{markerBatch(t, 11, 9, true)})

	c := e.compactor(func(c *Config, _ *Deps) {
		c.OffloadAge, c.TombstoneDelay, c.CompactInterval = -1, time.Hour, time.Millisecond
	})
	e.pass(c) // offload
	before := e.describeChain("state")
	e.advance(time.Second)
	if r := e.pass(c); r.Compacted != 2 {
		t.Fatalf("pass = %+v, want both ledgers of the run rewritten", r)
	}
	want := "1:k4=keep 4:marker(7) 5:k1=committed 6:marker(8) txn(9) 8:k2=open 9:k4=open 10:k3=x 11:marker(9)"
	if got := e.describeChain("state"); got != want {
		t.Fatalf("compacted chain:\n  %s\nwant\n  %s\n(before: %s)", got, want, before)
	}
	e.advance(time.Second)
	if r := e.pass(c); r.Compacted != 0 {
		t.Fatalf("recompaction rewrote %d ledgers", r.Compacted)
	}
}

// withHeader is an entry: an entry header with last stable offset lso
// (a transaction open at the entry's end), then batch.
func withHeader(lso int64, batch []byte) []byte {
	out := make([]byte, record.EntryHeaderSize, record.EntryHeaderSize+len(batch))
	record.PutEntryHeader(out, lso)
	return append(out, batch...)
}

// A ledger with a transaction open at its end stays on the bookies until
// a later sealed ledger ends with that transaction ended: the ingest
// writer taking the partition over reads the open transactions back from
// the entry holding the tail's LSO, and readers the LSO from the last
// entry's header; a segment keeps neither.
func TestOffloadKeepsLedgersOpenTransactionsNeed(t *testing.T) {
	e := newEnv(t)
	e.topic("tx", catalog.DefaultTopicConfig())
	k := func(key, value string) kv { return kv{[]byte(key), []byte(value)} }
	// a: producer 7's transaction opens at 1 and is open at a's end.
	a := e.ledgerOf("tx", 0, 1, [][]byte{
		kvBatch(t, 0, []kv{k("p", "plain")}),
		withHeader(1, txnBatch(t, 1, 7, []kv{k("t", "open")})),
	})
	// b: still open at b's end.
	b := e.ledgerOf("tx", 2, 2, [][]byte{withHeader(1, kvBatch(t, 2, []kv{k("p", "more")}))})
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge = -1 })
	if r := e.pass(c); r.Offloaded != 0 {
		t.Fatalf("pass = %+v: offloaded a ledger an open transaction needs", r)
	}
	// c: the transaction ends (its marker), nothing open at c's end.
	cl := e.ledgerOf("tx", 3, 3, [][]byte{markerBatch(t, 3, 7, true)})
	if r := e.pass(c); r.Offloaded != 3 {
		t.Fatalf("pass = %+v, want a, b and c offloaded once the transaction ended", r)
	}
	for _, m := range []catalog.LedgerMetadata{a, b, cl} {
		if got := e.get(m.ID); got.State != catalog.LedgerOffloaded {
			t.Fatalf("ledger %d is %v", m.ID, got.State)
		}
	}
	// A later ledger with another transaction open at its end — the last
	// of the chain — stays.
	d := e.ledgerOf("tx", 4, 4, [][]byte{withHeader(4, txnBatch(t, 4, 8, []kv{k("t", "again")}))})
	if r := e.pass(c); r.Offloaded != 0 || e.get(d.ID).State != catalog.LedgerClosed {
		t.Fatalf("pass = %+v, ledger %d %v: the last ledger with a transaction open at its end was offloaded", r, d.ID, e.get(d.ID).State)
	}
}

// A tombstone above a record of an undecided transaction stays past the
// tombstone delay: should that transaction commit, the tombstone is what
// still deletes the key.
func TestKeyCompactionKeepsATombstoneAboveAnUndecidedTransaction(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	cfg.CleanupPolicy = catalog.CleanupCompact
	e.topic("state", cfg)
	k := func(key, value string) kv { return kv{[]byte(key), []byte(value)} }
	e.ledgerOf("state", 0, 3, [][]byte{
		txnBatch(t, 0, 5, []kv{k("kz", "open")}),
		kvBatch(t, 1, []kv{{[]byte("kz"), nil}, k("ky", "old")}),
		kvBatch(t, 3, []kv{k("ky", "new")}),
	})
	e.ledgerOf("state", 4, 4, [][]byte{markerBatch(t, 4, 5, true)}) // the tail: not compacted
	c := e.compactor(func(c *Config, _ *Deps) {
		c.OffloadAge, c.TombstoneDelay, c.CompactInterval = -1, time.Hour, time.Millisecond
	})
	e.pass(c) // offload
	e.advance(2 * time.Hour)
	if r := e.pass(c); r.Compacted != 1 {
		t.Fatalf("pass = %+v, want the first ledger rewritten", r)
	}
	want := "txn(5) 0:kz=open 1:kz= 3:ky=new 4:marker(5)"
	if got := e.describeChain("state"); got != want {
		t.Fatalf("compacted chain:\n  %s\nwant\n  %s", got, want)
	}
}
