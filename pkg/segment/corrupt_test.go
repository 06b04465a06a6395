package segment

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// corruptionCase is a small segment with compressed and uncompressed
// batches, gaps and several intervals.
func corruptionCase(t *testing.T, entries int) (ledger, []byte) {
	l := genLedger(t, 99, genOpts{entries: entries, maxBatches: 2, maxRecords: 4, maxValue: 40, codecs: allCodecs, gaps: true})
	seg, _ := writeSegment(t, testWriterOptions(256), l)
	return l, seg
}

// checkDamaged opens and reads a damaged copy of a segment the way the
// read path does, then verifies it. Every step must fail with a typed
// error or return exactly the original's data; and since every byte is
// covered by a checksum, Verify must always find the damage.
// It reports which step caught the damage: "open", "read" or "verify".
func checkDamaged(t *testing.T, what string, damaged []byte, size int64, opts ReaderOptions, orig *Reader, l ledger) string {
	t.Helper()
	r, err := Open(bytes.NewReader(damaged), size, opts)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) || !isTyped(err) {
			t.Fatalf("%s: Open: untyped error %v", what, err)
		}
		return "open"
	}
	if r.Info() != orig.Info() {
		t.Fatalf("%s: Open succeeded with different info %+v", what, r.Info())
	}
	// Lookups answer what the original answers.
	for _, b := range l.batches {
		g1, e1 := r.Find(b.BaseOffset())
		g2, e2 := orig.Find(b.BaseOffset())
		t1, _ := r.FindTime(b.MaxTimestamp())
		t2, _ := orig.FindTime(b.MaxTimestamp())
		if g1 != g2 || (e1 == nil) != (e2 == nil) || t1 != t2 {
			t.Fatalf("%s: lookups differ from the original", what)
		}
	}
	got, err := readAll(r)
	caught := "read"
	switch {
	case err != nil && !errors.Is(err, ErrCorrupt):
		t.Fatalf("%s: read: untyped error %v", what, err)
	case err == nil:
		caught = "verify"
		if len(got) != len(l.batches) {
			t.Fatalf("%s: read %d batches without error, want %d", what, len(got), len(l.batches))
		}
		for i := range got {
			if !bytes.Equal(got[i], l.batches[i]) {
				t.Fatalf("%s: batch %d returned with different bytes", what, i)
			}
		}
	}
	if err := r.Verify(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: Verify: %v, want ErrCorrupt", what, err)
	}
	return caught
}

// Flip every byte, and every bit, of a small segment: each damaged copy
// fails with ErrCorrupt somewhere, and no read ever returns wrong data.
func TestCorruptEveryByte(t *testing.T) {
	l, seg := corruptionCase(t, 12)
	orig := mustOpen(t, seg)
	if orig.Intervals() < 3 {
		t.Fatalf("only %d intervals; the case should have several", orig.Intervals())
	}
	t.Logf("%d bytes, %d intervals", len(seg), orig.Intervals())
	damaged := make([]byte, len(seg))
	caught := map[string]int{}
	for i := range seg {
		for _, mask := range []byte{0xff, 1, 2, 4, 8, 16, 32, 64, 128} {
			copy(damaged, seg)
			damaged[i] ^= mask
			caught[checkDamaged(t, "flip", damaged, int64(len(damaged)), ReaderOptions{}, orig, l)]++
		}
	}
	// The whole object fits the tail read: Open checks all but the data,
	// and reading catches every data flip.
	if want := 9 * int(orig.All().Len()); caught["read"] != want || caught["verify"] != 0 {
		t.Fatalf("caught by step: %v; want %d by reads", caught, want)
	}
}

// With a tail read too small to cover the header, Open does not see a
// damaged header; reads still return only correct data and Verify catches
// it. Flipping every byte of a larger segment this way also exercises the
// second index read.
func TestCorruptEveryByteShortTail(t *testing.T) {
	l, seg := corruptionCase(t, 30)
	opts := ReaderOptions{TailReadBytes: MinTailReadBytes}
	if len(seg) <= MinTailReadBytes {
		t.Fatalf("segment of %d bytes fits the tail read", len(seg))
	}
	orig := mustOpen(t, seg)
	damaged := make([]byte, len(seg))
	caught := map[string]int{}
	for i := range seg {
		copy(damaged, seg)
		damaged[i] ^= 0x55
		caught[checkDamaged(t, "flip", damaged, int64(len(damaged)), opts, orig, l)]++
	}
	if caught["verify"] != HeaderSize || caught["read"] != int(orig.All().Len()) {
		t.Fatalf("caught by step: %v; want the header by Verify only, the data by reads", caught)
	}
}

// Every truncation, every extension, and concatenations are refused.
func TestTruncatedAndExtended(t *testing.T) {
	l, seg := corruptionCase(t, 12)
	orig := mustOpen(t, seg)
	for n := range len(seg) {
		prefix := seg[:n]
		if _, err := Open(bytes.NewReader(prefix), int64(n), ReaderOptions{}); !errors.Is(err, ErrCorrupt) || !isTyped(err) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
		// The object lost bytes but the size is the original's.
		if _, err := Open(bytes.NewReader(prefix), int64(len(seg)), ReaderOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes, opened with the full size: %v", n, err)
		}
	}
	for _, extra := range [][]byte{{0}, []byte("garbage"), seg[len(seg)-TrailerSize:], seg} {
		ext := append(append([]byte(nil), seg...), extra...)
		checkDamaged(t, "extended", ext, int64(len(ext)), ReaderOptions{}, orig, l)
		pre := append(append([]byte(nil), extra...), seg...)
		checkDamaged(t, "prefixed", pre, int64(len(pre)), ReaderOptions{}, orig, l)
	}
	// A range read of a truncated object is a typed error too.
	rng := orig.Interval(orig.Intervals() - 1)
	short := &Reader{ra: bytes.NewReader(seg[:rng.End-1]), size: orig.size, version: orig.version, f: orig.f, index: orig.index, times: orig.times}
	if _, err := short.ReadRange(rng, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short range read: %v", err)
	}
}

// Data swapped between intervals, or one batch swapped for another valid
// batch, passes each batch's own CRC but not the index's.
func TestSwappedBatches(t *testing.T) {
	l, seg := corruptionCase(t, 12)
	orig := mustOpen(t, seg)
	// Same-length batches exchanged.
	for i := range l.batches {
		for j := i + 1; j < len(l.batches); j++ {
			if len(l.batches[i]) != len(l.batches[j]) {
				continue
			}
			damaged := append([]byte(nil), seg...)
			pi, pj := HeaderSize+offsetOf(l.batches, i), HeaderSize+offsetOf(l.batches, j)
			copy(damaged[pi:], l.batches[j])
			copy(damaged[pj:], l.batches[i])
			checkDamaged(t, "swap", damaged, int64(len(damaged)), ReaderOptions{}, orig, l)
		}
	}
	// A batch's base offset changed: outside the batch's CRC.
	damaged := append([]byte(nil), seg...)
	pos := HeaderSize + offsetOf(l.batches, 3)
	record.SetBaseOffset(damaged[pos:], l.batches[3].BaseOffset()+1)
	if err := record.Verify(damaged[pos : pos+len(l.batches[3])]); err != nil {
		t.Fatal("the batch's own CRC should not cover its base offset")
	}
	checkDamaged(t, "base offset", damaged, int64(len(damaged)), ReaderOptions{}, orig, l)
}
