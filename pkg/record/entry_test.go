package record

import (
	"errors"
	"testing"
)

// entryOf is a header with lso (when lso >= 0) followed by two batches of
// three records at offsets 10..12 and 13..15.
func entryOf(t *testing.T, lso int64) []byte {
	t.Helper()
	var e []byte
	if lso >= 0 {
		e = make([]byte, EntryHeaderSize)
		PutEntryHeader(e, lso)
	}
	for _, base := range []int64{10, 13} {
		b := build(t, BuilderOptions{}, sampleRecords(3, uint64(base)))
		SetBaseOffset(b, base)
		e = append(e, b...)
	}
	return e
}

func TestEntryHeader(t *testing.T) {
	for _, tc := range []struct {
		name           string
		lso            int64
		wantLast, want int64
	}{
		{"no header: stable to the end", -1, 15, 16},
		{"transaction open from 11", 11, 15, 11},
		{"header at the end", 16, 15, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := entryOf(t, tc.lso)
			last, lso, err := EntryStableOffset(e)
			if err != nil || last != tc.wantLast || lso != tc.want {
				t.Fatalf("EntryStableOffset = %d, %d, %v; want %d, %d", last, lso, err, tc.wantLast, tc.want)
			}
			if got, err := EntryLastOffset(e); err != nil || got != tc.wantLast {
				t.Fatalf("EntryLastOffset = %d, %v; want %d", got, err, tc.wantLast)
			}
			h, batches, err := EntryBatches(e)
			if err != nil || h.Present != (tc.lso >= 0) {
				t.Fatalf("EntryBatches: %+v, %v", h, err)
			}
			b, _, err := Split(batches)
			if err != nil || b.BaseOffset() != 10 {
				t.Fatalf("first batch after the header: %v (base %d)", err, b.BaseOffset())
			}
		})
	}
}

func TestEntryHeaderRefusals(t *testing.T) {
	good := entryOf(t, 11)
	for _, tc := range []struct {
		name  string
		edit  func([]byte) []byte
		class error
	}{
		{"unknown tag", func(e []byte) []byte { e[0] = 0xE8; return e }, ErrInvalid},
		{"unknown version", func(e []byte) []byte { e[1] = 2; return e }, ErrInvalid},
		{"flipped lso bit", func(e []byte) []byte { e[9] ^= 1; return e }, ErrCorrupt},
		{"truncated header", func(e []byte) []byte { return e[:EntryHeaderSize-1] }, ErrInvalid},
		{"lso beyond the end", func(e []byte) []byte {
			PutEntryHeader(e, 17)
			return e
		}, ErrInvalid},
		{"negative lso", func(e []byte) []byte {
			PutEntryHeader(e, -5)
			return e
		}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.edit(append([]byte(nil), good...))
			_, _, err := EntryStableOffset(e)
			var fe *FormatError
			if !errors.Is(err, tc.class) || !errors.As(err, &fe) {
				t.Fatalf("EntryStableOffset = %v; want a *FormatError wrapping %v", err, tc.class)
			}
		})
	}
}
