package compactor

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// kv is one record to write: a nil value is a tombstone.
type kv struct{ key, value []byte }

// kvBatch encodes recs as one batch at base.
func kvBatch(t testing.TB, base int64, recs []kv) []byte {
	t.Helper()
	return kvBatchWith(t, base, record.BuilderOptions{}, recs)
}

// kvBatchWith is kvBatch built with opts (a producer, transactional).
func kvBatchWith(t testing.TB, base int64, opts record.BuilderOptions, recs []kv) []byte {
	t.Helper()
	b, err := record.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if err := b.Append(&record.Record{Timestamp: 1_700_000_000_000 + base + int64(i), Key: r.key, Value: r.value}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out, base)
	return out
}

// readChain decodes every record of the partition's offloaded ledgers, in
// offset order.
func (e *env) readChain(topic string) []record.Record {
	e.t.Helper()
	p, err := e.cat.GetPartition(e.ctx(), topic, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []record.Record
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
		if err := sr.Verify(e.ctx()); err != nil {
			e.t.Fatal(err)
		}
		raw, _ := sr.ReadRange(sr.All(), nil)
		bi := sr.Batches(sr.All(), raw)
		for bi.Next() {
			if err := it.Reset(bi.Batch()); err != nil {
				e.t.Fatal(err)
			}
			for it.Next() {
				r := *it.Record()
				r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				if len(out) > 0 && r.Offset <= out[len(out)-1].Offset {
					e.t.Fatalf("offset %d after %d", r.Offset, out[len(out)-1].Offset)
				}
				out = append(out, r)
			}
		}
		if bi.Err() != nil {
			e.t.Fatal(bi.Err())
		}
	}
	return out
}

// Key compaction: a compact topic with many updates per key over several
// offloaded ledgers ends up with exactly the newest record per key, at its
// original offset (gaps between), and its tombstones go once the delay is
// over, not before. The old segments are swept after the orphan grace, and
// a further compaction changes nothing.
func TestKeyCompactionKeepsNewestPerKeyAndDropsTombstonesAfterDelay(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	cfg.CleanupPolicy = catalog.CleanupCompact
	cfg.RetentionMs = 1 // ignored under compact: nothing is trimmed
	e.topic("state", cfg)

	// 4 ledgers × 3 entries × 10 records, keys k0..k4 updated over and
	// over; k3 ends with a tombstone. Then a tail ledger with another key.
	want := map[string]struct {
		offset int64
		value  []byte
	}{}
	off := int64(0)
	for range 4 {
		first := off
		var payloads [][]byte
		for range 3 {
			var recs []kv
			for i := range 10 {
				k := fmt.Appendf(nil, "k%d", (off+int64(i))%5)
				v := fmt.Appendf(nil, "v%d", off+int64(i))
				recs = append(recs, kv{k, v})
			}
			payloads = append(payloads, kvBatch(t, off, recs))
			off += 10
		}
		e.ledgerOf("state", first, off-1, payloads)
	}
	// Last writes: k3 deleted, k1 set once more, in a ledger of their own.
	last := e.ledgerOf("state", off, off+1, [][]byte{kvBatch(t, off, []kv{{[]byte("k3"), nil}, {[]byte("k1"), []byte("final")}})})
	e.ledgerOf("state", off+2, off+2, [][]byte{kvBatch(t, off+2, []kv{{[]byte("other"), []byte("x")}})})
	for o := off - 10; o < off; o++ {
		k := fmt.Sprintf("k%d", o%5)
		want[k] = struct {
			offset int64
			value  []byte
		}{o, fmt.Appendf(nil, "v%d", o)}
	}
	want["k1"] = struct {
		offset int64
		value  []byte
	}{off + 1, []byte("final")}
	want["other"] = struct {
		offset int64
		value  []byte
	}{off + 2, []byte("x")} // the tail: offloaded, never compacted
	delete(want, "k3") // a tombstone now
	_ = last

	c := e.compactor(func(c *Config, _ *Deps) {
		c.OffloadAge, c.TombstoneDelay, c.CompactInterval = -1, time.Hour, time.Millisecond
	})
	e.pass(c) // offload
	e.advance(time.Second)
	r := e.pass(c) // compact
	if r.Compacted == 0 || r.Trimmed != 0 {
		t.Fatalf("pass = %+v, want compaction and no trim", r)
	}
	check := func(tombstone bool) {
		t.Helper()
		got := e.readChain("state")
		seen := map[string]bool{}
		for _, rec := range got {
			k := string(rec.Key)
			if seen[k] {
				t.Fatalf("key %s twice", k)
			}
			seen[k] = true
			if k == "k3" {
				if !tombstone || rec.Value != nil || rec.Offset != off {
					t.Fatalf("k3 = %q at %d (tombstone expected: %v)", rec.Value, rec.Offset, tombstone)
				}
				continue
			}
			w, ok := want[k]
			if !ok || w.offset != rec.Offset || !bytes.Equal(w.value, rec.Value) {
				t.Fatalf("%s = %q at %d, want %q at %d", k, rec.Value, rec.Offset, w.value, w.offset)
			}
		}
		if seen["k3"] != tombstone || len(seen) != len(want)+btoi(tombstone) {
			t.Fatalf("keys %v, want %d", seen, len(want)+btoi(tombstone))
		}
	}
	check(true)
	// Converged: compacting again rewrites nothing.
	e.advance(time.Second)
	if r := e.pass(c); r.Compacted != 0 {
		t.Fatalf("recompaction rewrote %d ledgers", r.Compacted)
	}
	// After the tombstone delay the tombstone goes.
	e.advance(2 * time.Hour)
	if r := e.pass(c); r.Compacted != 1 {
		t.Fatalf("pass after the delay = %+v, want the tombstone's ledger rewritten", r)
	}
	check(false)
	// Old segments are orphans now; the sweep takes them after the grace.
	e.advance(2 * time.Hour)
	e.pass(c)
	p, _ := e.cat.GetPartition(e.ctx(), "state", 0)
	var live []string
	for _, r := range p.Ledgers {
		if m := e.get(r.ID); m.Location != "" {
			live = append(live, m.Location)
		}
	}
	if segs := e.keys(segmentsDir); len(segs) != len(live) {
		t.Fatalf("objects %v, want exactly the live %v", segs, live)
	}
	check(false)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A compaction that dies before the catalog swap changes nothing readers
// see; the next one redoes it, and the abandoned rewrite is swept as an
// orphan after the grace.
func TestKeyCompactionCrashBeforeSwap(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	cfg.CleanupPolicy = catalog.CleanupCompact
	e.topic("s", cfg)
	a := e.ledgerOf("s", 0, 3, [][]byte{kvBatch(t, 0, []kv{{[]byte("a"), []byte("1")}, {[]byte("b"), []byte("1")}, {[]byte("a"), []byte("2")}, {[]byte("b"), []byte("2")}})})
	e.ledgerOf("s", 4, 4, [][]byte{kvBatch(t, 4, []kv{{[]byte("c"), []byte("1")}})})
	killed := false
	dying := e.compactor(func(c *Config, d *Deps) {
		c.OffloadAge, c.CompactInterval = -1, time.Millisecond
		d.Hooks.Step = func(s Step, id catalog.LedgerID) error {
			if s == StepBeforeCAS && id == a.ID && e.get(a.ID).State == catalog.LedgerOffloaded && !killed {
				killed = true
				return errKilled
			}
			return nil
		}
	})
	e.pass(dying) // offload
	e.advance(time.Second)
	if _, err := dying.Pass(e.ctx()); !errors.Is(err, errKilled) {
		t.Fatalf("pass: %v, want the kill", err)
	}
	before := e.get(a.ID)
	if before.Location != dying.segmentKey(a) || len(e.readChain("s")) != 5 {
		t.Fatalf("a dead compaction changed the ledger: %+v", before)
	}
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.CompactInterval = -1, time.Millisecond })
	if r := e.pass(c); r.Compacted != 1 {
		t.Fatalf("rerun = %+v", r)
	}
	if got := e.readChain("s"); len(got) != 3 || string(got[0].Value) != "2" || got[0].Offset != 2 || got[1].Offset != 3 || got[2].Offset != 4 {
		t.Fatalf("after compaction: %+v", got)
	}
	e.advance(2 * time.Hour)
	if r := e.pass(c); r.Orphans != 1 {
		t.Fatalf("sweep = %+v, want the original segment swept (the rewrite overwrote the abandoned one)", r)
	}
}
