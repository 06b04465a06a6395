package segment

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// FuzzReader: no input panics or gets past Open without a typed error
// unless it is consistent; and whatever Verify accepts reads back through
// the ranged path unchanged, with Find and FindTime agreeing with a linear
// scan. With seal set, the fuzzer's mutations get every checksum it can
// locate recomputed, so it explores the structural checks behind them.
func FuzzReader(f *testing.F) {
	entries, _ := goldenBatches(f)
	var golden bytes.Buffer
	w, _ := NewWriter(&golden, goldenOptions())
	for _, e := range entries {
		_ = w.Append(e)
	}
	_, _ = w.Finish()
	f.Add(golden.Bytes(), false)
	f.Add(golden.Bytes(), true)
	for i, interval := range []int{1, 300} {
		l := genLedger(f, uint64(i), genOpts{entries: 6, maxBatches: 2, maxRecords: 3, maxValue: 20, codecs: allCodecs, gaps: true})
		seg, _ := writeSegment(f, testWriterOptions(interval), l)
		f.Add(seg, false)
		f.Add(seg, true)
	}
	f.Add([]byte{}, false)
	f.Add(make([]byte, minObjectSize), true)

	opts := ReaderOptions{MaxSegmentBytes: 1 << 20, MaxIndexEntries: 1 << 10, TailReadBytes: MinTailReadBytes}
	f.Fuzz(func(t *testing.T, in []byte, seal bool) {
		b := append([]byte(nil), in...)
		if seal {
			reseal(b)
		}
		r, err := Open(bytes.NewReader(b), int64(len(b)), opts)
		if err != nil {
			if !isTyped(err) {
				t.Fatalf("Open: untyped error %v", err)
			}
			return
		}
		info := r.Info()
		got, rerr := readAll(r)
		if rerr != nil && !isTyped(rerr) {
			t.Fatalf("read: untyped error %v", rerr)
		}
		verr := r.Verify(context.Background())
		if verr != nil {
			if !isTyped(verr) {
				t.Fatalf("Verify: untyped error %v", verr)
			}
			return
		}
		// Verified: every piece agrees.
		if rerr != nil {
			t.Fatalf("Verify accepts what the ranged read refuses: %v", rerr)
		}
		if int64(len(got)) != info.BatchCount || !bytes.Equal(bytes.Join(toBytes(got), nil), b[info.Data.Start:info.Data.End]) {
			t.Fatal("the batches read are not the data section")
		}
		for _, bt := range got {
			if err := record.Verify(bt); err != nil {
				t.Fatalf("returned a batch that fails record.Verify: %v", err)
			}
			for _, o := range []int64{bt.BaseOffset(), bt.LastOffset(), bt.BaseOffset() - 1} {
				checkFind(t, r, got, o)
			}
			checkFindTime(t, r, got, bt.MaxTimestamp())
		}
		checkFind(t, r, got, info.LastOffset+1)
		checkFindTime(t, r, got, info.MaxTimestamp+1)
	})
}

func toBytes(bs []record.Batch) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = b
	}
	return out
}

// batchIn reports whether batch want of got lies in rng.
func batchIn(r *Reader, got []record.Batch, want int, rng Range) bool {
	pos := r.All().Start + int64(offsetOf(got, want))
	return rng.Start <= pos && pos+int64(len(got[want])) <= rng.End
}

func checkFind(t *testing.T, r *Reader, got []record.Batch, o int64) {
	t.Helper()
	rng, err := r.Find(o)
	want := firstWithLast(got, o)
	switch {
	case want < 0 && !errors.Is(err, ErrOutOfRange):
		t.Fatalf("Find(%d): %v, %v; want ErrOutOfRange", o, rng, err)
	case want >= 0 && (err != nil || !batchIn(r, got, want, rng)):
		t.Fatalf("Find(%d): %v, %v; batch %d is not in it", o, rng, err, want)
	}
}

func checkFindTime(t *testing.T, r *Reader, got []record.Batch, ts int64) {
	t.Helper()
	rng, err := r.FindTime(ts)
	want := firstWithTime(got, ts)
	switch {
	case want < 0 && !errors.Is(err, ErrNoTimestamp):
		t.Fatalf("FindTime(%d): %v, %v; want ErrNoTimestamp", ts, rng, err)
	case want >= 0 && (err != nil || !batchIn(r, got, want, rng)):
		t.Fatalf("FindTime(%d): %v, %v; batch %d is not in it", ts, rng, err, want)
	}
}

// reseal recomputes, in place, every checksum of b whose position it can
// work out from b's own (possibly nonsensical) fields: header, interval
// CRCs, data, index and footer CRCs, trailer. It never panics.
func reseal(b []byte) {
	n := int64(len(b))
	if n >= HeaderSize {
		le.PutUint32(b[12:16], checksum(b[0:12]))
	}
	if n < TrailerSize {
		return
	}
	tr := b[n-TrailerSize:]
	flen := int64(le.Uint32(tr[0:4]))
	fpos := n - TrailerSize - flen
	if flen >= FooterFixedSize && fpos >= 0 {
		fb := b[fpos : fpos+flen]
		dataPos, dataLen := int64(le.Uint64(fb[56:64])), int64(le.Uint64(fb[64:72]))
		offPos, timePos := int64(le.Uint64(fb[72:80])), int64(le.Uint64(fb[80:88]))
		offCount, timeCount := int64(le.Uint32(fb[88:92])), int64(le.Uint32(fb[92:96]))
		inside := func(pos, length int64) bool { return pos >= 0 && length >= 0 && length <= fpos && pos <= fpos-length }
		if inside(offPos, offCount*OffsetEntrySize) {
			prev := dataPos
			for i := range offCount {
				e := b[offPos+i*OffsetEntrySize:]
				end := int64(le.Uint64(e[8:16]))
				if prev >= 0 && prev <= end && end <= fpos {
					le.PutUint32(e[16:20], checksum(b[prev:end]))
				}
				prev = end
			}
			le.PutUint32(fb[100:104], checksum(b[offPos:offPos+offCount*OffsetEntrySize]))
		}
		if inside(dataPos, dataLen) {
			le.PutUint32(fb[96:100], checksum(b[dataPos:dataPos+dataLen]))
		}
		if inside(timePos, timeCount*TimeEntrySize) {
			le.PutUint32(fb[104:108], checksum(b[timePos:timePos+timeCount*TimeEntrySize]))
		}
		le.PutUint32(tr[8:12], checksum(fb))
	}
	le.PutUint32(tr[12:16], checksum(tr[0:12]))
}

// reseal must leave a valid segment valid, or the fuzzer's sealed seeds
// would explore nothing.
func TestResealKeepsValid(t *testing.T) {
	l := genLedger(t, 1, genOpts{entries: 20, maxValue: 30})
	seg, _ := writeSegment(t, testWriterOptions(100), l)
	sealed := append([]byte(nil), seg...)
	reseal(sealed)
	if !bytes.Equal(sealed, seg) {
		t.Fatal("reseal changed a valid segment")
	}
	// And it repairs a damaged interval CRC, so the damage reaches the
	// structural checks.
	sealed[HeaderSize+10] ^= 1
	reseal(sealed)
	r := mustOpen(t, sealed)
	if _, err := readAll(r); !errors.Is(err, ErrCorrupt) || !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("a resealed flip in a batch length: %v, want the batch framing to stop it", err)
	}
	if err := r.Verify(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a resealed damaged segment: %v", err)
	}
}
