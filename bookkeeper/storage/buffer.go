package storage

import (
	"cmp"
	"slices"
	"time"
)

// entryRef names an entry.
type entryRef struct{ ledger, entry int64 }

func compareRefs(a, b entryRef) int {
	return cmp.Or(cmp.Compare(a.ledger, b.ledger), cmp.Compare(a.entry, b.entry))
}

// bufEntry is a buffered entry. Immutable once buffered: a second add of
// the same entry replaces the pointer, never the contents.
type bufEntry struct {
	lac     int64
	crc     uint32
	payload []byte // the storage's own copy
}

// writeBuffer holds added entries until a flush writes them to the entry
// log and index (DbLedgerStorage's write cache).
type writeBuffer struct {
	entries map[entryRef]*bufEntry
	bytes   int64     // frame bytes, headers included
	since   time.Time // when it started taking adds
}

func newWriteBuffer() *writeBuffer {
	return &writeBuffer{entries: map[entryRef]*bufEntry{}, since: time.Now()}
}

// put buffers e as entry r and reports whether r was not buffered yet.
func (b *writeBuffer) put(r entryRef, e *bufEntry) bool {
	old, replaced := b.entries[r]
	if replaced {
		b.bytes -= frameSize(len(old.payload))
	}
	b.entries[r] = e
	b.bytes += frameSize(len(e.payload))
	return !replaced
}

func (b *writeBuffer) get(r entryRef) *bufEntry {
	if b == nil {
		return nil
	}
	return b.entries[r]
}

// dropLedger removes every buffered entry of ledger.
func (b *writeBuffer) dropLedger(ledger int64) {
	for r, e := range b.entries {
		if r.ledger == ledger {
			b.bytes -= frameSize(len(e.payload))
			delete(b.entries, r)
		}
	}
}

// sorted returns the buffered entries ordered by ledger, then entry, so a
// flush writes each ledger's entries together (reads of a range then touch
// few pages).
func (b *writeBuffer) sorted() []entryRef {
	refs := make([]entryRef, 0, len(b.entries))
	for r := range b.entries {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, compareRefs)
	return refs
}
