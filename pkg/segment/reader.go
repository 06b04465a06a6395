package segment

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/sluicemq/sluice/pkg/record"
)

// maxIntervalBytes bounds one index interval of any segment: the writer
// closes an interval at the first batch end at or past IndexIntervalBytes,
// and a batch is at most record.MaxMaxBatchBytes.
const maxIntervalBytes = MaxIndexIntervalBytes + record.MaxMaxBatchBytes

// Info is what a segment's footer says about it.
type Info struct {
	Version   int
	LedgerID  int64
	TopicID   string
	Partition int32
	// FirstOffset is the base offset of the first batch, LastOffset the
	// last offset of the last batch. A compacted segment may have gaps.
	FirstOffset, LastOffset int64
	// RecordCount sums the batches' recordCount fields.
	RecordCount int64
	BatchCount  int64
	// MaxTimestamp is the largest batch maxTimestamp.
	MaxTimestamp int64
	// Size is the object's size; Data the range of all its batches.
	Size int64
	Data Range
	// IndexEntries and TimeIndexEntries count the index entries; the data
	// is cut into IndexEntries intervals.
	IndexEntries, TimeIndexEntries int
}

func newInfo(f *footer, version int, size int64, nOff, nTime int) Info {
	return Info{
		Version:          version,
		LedgerID:         f.ledgerID,
		TopicID:          f.topicID,
		Partition:        f.partition,
		FirstOffset:      f.firstOffset,
		LastOffset:       f.lastOffset,
		RecordCount:      f.recordCount,
		BatchCount:       f.batchCount,
		MaxTimestamp:     f.maxTimestamp,
		Size:             size,
		Data:             Range{Start: f.dataPos, End: f.dataPos + f.dataLen},
		IndexEntries:     nOff,
		TimeIndexEntries: nTime,
	}
}

// Range is a byte range [Start, End) of a segment object: a run of whole
// index intervals, as Find, FindTime, Next, Extend, Interval and All return.
// It is the range of one ranged GET, and a stable cache key.
type Range struct {
	Start, End int64
}

// Len is the range's length in bytes.
func (r Range) Len() int64 { return r.End - r.Start }

// Reader reads one segment through an io.ReaderAt (a file, or ranged GETs of
// an object). Open reads the footer and indexes; lookups are then in memory,
// and the batches are read by the caller, a range at a time, and checked by
// an Iterator. A Reader is immutable after Open and safe for concurrent
// use; its ReaderAt must be too (as io.ReaderAt requires).
type Reader struct {
	ra      io.ReaderAt
	size    int64
	version int
	f       footer
	index   []offsetEntry
	times   []timeEntry
}

// Open reads a segment's trailer, footer and indexes — one read of the
// object's last ReaderOptions.TailReadBytes, and a second only when the
// indexes do not fit in it — and checks them: checksums, and that every
// position and count fits the object and agrees with the rest. The header
// is checked too when it falls inside the bytes read; Verify checks
// everything. size is the object's size. Errors: ErrCorrupt
// (*CorruptError), ErrUnsupportedVersion, ErrLimit, ErrInvalid (options),
// or the ReaderAt's error, wrapped.
func Open(ra io.ReaderAt, size int64, opts ReaderOptions) (*Reader, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	switch {
	case size < 0:
		return nil, invalidf("open: size %d is negative", size)
	case size > opts.MaxSegmentBytes:
		return nil, limitf("open: object of %d bytes, more than MaxSegmentBytes %d", size, opts.MaxSegmentBytes)
	case size < minObjectSize:
		return nil, corruptf(SectionObject, -1, "%d bytes, smaller than the smallest segment (%d): truncated, or not a segment", size, minObjectSize)
	}
	tail := make([]byte, min(size, int64(opts.TailReadBytes)))
	tailPos := size - int64(len(tail))
	if err := readAt(ra, tail, tailPos); err != nil {
		return nil, err
	}
	// at returns the bytes [pos, pos+n) of the object from the tail.
	at := func(pos, n int64) []byte { return tail[pos-tailPos : pos-tailPos+n] }

	tr, err := decodeTrailer(at(size-TrailerSize, TrailerSize), size-TrailerSize)
	if err != nil {
		return nil, err
	}
	fpos := size - TrailerSize - int64(tr.footerLen)
	if fpos < tailPos || fpos < HeaderSize {
		return nil, corruptf(SectionTrailer, size-TrailerSize, "footer length %d does not fit a %d-byte object", tr.footerLen, size)
	}
	fb := at(fpos, int64(tr.footerLen))
	if got := checksum(fb); got != tr.footerCRC {
		return nil, corruptf(SectionFooter, fpos, "crc stored %#08x, computed %#08x", tr.footerCRC, got)
	}
	f, err := decodeFooter(fb, fpos)
	if err != nil {
		return nil, err
	}
	if err := checkFooter(&f, fpos, opts); err != nil {
		return nil, err
	}

	// The indexes: counts are bounded and positions agree with the
	// object's size (checkFooter), so this allocation is bounded too.
	idxLen := fpos - f.offIdxPos
	var idx []byte
	if f.offIdxPos >= tailPos {
		idx = at(f.offIdxPos, idxLen)
	} else {
		idx = make([]byte, idxLen)
		if err := readAt(ra, idx, f.offIdxPos); err != nil {
			return nil, err
		}
	}
	r := &Reader{ra: ra, size: size, version: tr.version, f: f}
	if err := r.decodeIndexes(idx); err != nil {
		return nil, err
	}
	if tailPos == 0 {
		if err := checkHeader(tail, tr.version); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkFooter checks a decoded footer against the object: sections
// contiguous in the version 1 order, counts within the limits, offsets and
// counts consistent. fpos is the footer's position.
func checkFooter(f *footer, fpos int64, opts ReaderOptions) error {
	bad := func(format string, args ...any) error { return corruptf(SectionFooter, fpos, format, args...) }
	switch {
	case f.ledgerID < 0:
		return bad("ledger id %d is negative", f.ledgerID)
	case f.partition < 0:
		return bad("partition %d is negative", f.partition)
	case len(f.topicID) == 0:
		return bad("empty topic id")
	case f.dataPos != HeaderSize:
		return bad("data at %d, want %d", f.dataPos, HeaderSize)
	case f.dataLen < minBatchSize || f.dataLen > fpos-f.dataPos:
		return bad("data length %d does not fit before the footer at %d", f.dataLen, fpos)
	case f.offIdxPos != f.dataPos+f.dataLen:
		return bad("offset index at %d, want %d (after the data)", f.offIdxPos, f.dataPos+f.dataLen)
	case f.offIdxCount < 1 || f.timeIdxCount < 1 || f.timeIdxCount > f.offIdxCount:
		return bad("%d offset and %d time index entries", f.offIdxCount, f.timeIdxCount)
	case int64(f.offIdxCount)*OffsetEntrySize > fpos-f.offIdxPos:
		return bad("%d offset index entries do not fit before the footer", f.offIdxCount)
	case f.timeIdxPos != f.offIdxPos+int64(f.offIdxCount)*OffsetEntrySize:
		return bad("time index at %d, want %d (after the offset index)", f.timeIdxPos, f.offIdxPos+int64(f.offIdxCount)*OffsetEntrySize)
	case f.timeIdxPos+int64(f.timeIdxCount)*TimeEntrySize != fpos:
		return bad("time index of %d entries at %d does not end at the footer (%d)", f.timeIdxCount, f.timeIdxPos, fpos)
	case f.firstOffset < 0 || f.lastOffset < f.firstOffset:
		return bad("offsets %d..%d", f.firstOffset, f.lastOffset)
	case f.batchCount < int64(f.offIdxCount) || f.batchCount > f.dataLen/minBatchSize:
		return bad("%d batches in %d intervals of %d bytes", f.batchCount, f.offIdxCount, f.dataLen)
	case f.recordCount < 0 || f.recordCount-1 > f.lastOffset-f.firstOffset:
		return bad("%d records for offsets %d..%d", f.recordCount, f.firstOffset, f.lastOffset)
	}
	// Checked after the layout, so that a corrupt count is reported as
	// corruption; a consistent footer over a big index is a limit.
	if n := max(f.offIdxCount, f.timeIdxCount); n > opts.MaxIndexEntries {
		return limitf("open: %d index entries, more than MaxIndexEntries %d", n, opts.MaxIndexEntries)
	}
	return nil
}

// decodeIndexes checks the indexes' checksums and decodes and checks their
// entries (b holds both, the offset index first).
func (r *Reader) decodeIndexes(b []byte) error {
	f := &r.f
	offB, timeB := b[:f.offIdxCount*OffsetEntrySize], b[f.offIdxCount*OffsetEntrySize:]
	if got := checksum(offB); got != f.offIdxCRC {
		return corruptf(SectionOffsetIndex, f.offIdxPos, "crc stored %#08x, computed %#08x", f.offIdxCRC, got)
	}
	if got := checksum(timeB); got != f.timeIdxCRC {
		return corruptf(SectionTimeIndex, f.timeIdxPos, "crc stored %#08x, computed %#08x", f.timeIdxCRC, got)
	}
	r.index = make([]offsetEntry, f.offIdxCount)
	prevLast, prevEnd, dataEnd := f.firstOffset-1, f.dataPos, f.dataPos+f.dataLen
	for i := range r.index {
		e := decodeOffsetEntry(offB[i*OffsetEntrySize:])
		pos := f.offIdxPos + int64(i)*OffsetEntrySize
		switch {
		case e.end < prevEnd+minBatchSize || e.end > dataEnd:
			return corruptf(SectionOffsetIndex, pos, "entry %d ends at %d, want (%d, %d]", i, e.end, prevEnd+minBatchSize-1, dataEnd)
		case e.end-prevEnd > maxIntervalBytes:
			return corruptf(SectionOffsetIndex, pos, "entry %d: interval of %d bytes, more than any writer makes (%d)", i, e.end-prevEnd, maxIntervalBytes)
		case e.last <= prevLast || e.last > f.lastOffset:
			return corruptf(SectionOffsetIndex, pos, "entry %d: last offset %d, want (%d, %d]", i, e.last, prevLast, f.lastOffset)
		}
		r.index[i] = e
		prevLast, prevEnd = e.last, e.end
	}
	if prevEnd != dataEnd || prevLast != f.lastOffset {
		return corruptf(SectionOffsetIndex, f.offIdxPos, "last entry ends at %d with offset %d, want the data end %d and offset %d", prevEnd, prevLast, dataEnd, f.lastOffset)
	}

	r.times = make([]timeEntry, f.timeIdxCount)
	j := 0 // the offset index entry the time entry must match
	for k := range r.times {
		e := decodeTimeEntry(timeB[k*TimeEntrySize:])
		pos := f.timeIdxPos + int64(k)*TimeEntrySize
		if k > 0 && e.ts <= r.times[k-1].ts {
			return corruptf(SectionTimeIndex, pos, "entry %d: timestamp %d not above %d", k, e.ts, r.times[k-1].ts)
		}
		// Time entries sit at offset index boundaries, the first at the
		// first boundary (FindTime depends on it).
		if k == 0 && e.offset != r.index[0].last {
			return corruptf(SectionTimeIndex, pos, "entry 0: offset %d, want the first interval's last offset %d", e.offset, r.index[0].last)
		}
		for j < len(r.index) && r.index[j].last < e.offset {
			j++
		}
		if j == len(r.index) || r.index[j].last != e.offset {
			return corruptf(SectionTimeIndex, pos, "entry %d: offset %d is not an interval's last offset", k, e.offset)
		}
		j++
		r.times[k] = e
	}
	if last := r.times[len(r.times)-1].ts; last != f.maxTimestamp {
		return corruptf(SectionTimeIndex, f.timeIdxPos, "last timestamp %d, but the footer's max timestamp is %d", last, f.maxTimestamp)
	}
	return nil
}

func checkHeader(b []byte, version int) error {
	v, err := decodeHeader(b)
	if err != nil {
		return err
	}
	if v != version {
		return corruptf(SectionHeader, 0, "version %d, but the trailer says %d", v, version)
	}
	return nil
}

// readAt reads exactly len(buf) bytes at pos. A short read means the
// object is shorter than the size it was opened with: corruption.
func readAt(ra io.ReaderAt, buf []byte, pos int64) error {
	n, err := ra.ReadAt(buf, pos)
	if n == len(buf) {
		return nil // io.EOF with a full read is allowed at the end
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &CorruptError{Section: SectionObject, Pos: pos, Reason: fmt.Sprintf("short read: %d of %d bytes (the object is shorter than its size)", n, len(buf)), Err: err}
	}
	return fmt.Errorf("segment: read %d bytes at %d: %w", len(buf), pos, err)
}

// Info returns what the footer says.
func (r *Reader) Info() Info {
	return newInfo(&r.f, r.version, r.size, len(r.index), len(r.times))
}

// All is the range of all batches.
func (r *Reader) All() Range { return Range{Start: r.f.dataPos, End: r.f.dataPos + r.f.dataLen} }

// Intervals is the number of index intervals the data is cut into.
func (r *Reader) Intervals() int { return len(r.index) }

// Interval returns index interval i, 0 ≤ i < Intervals().
func (r *Reader) Interval(i int) Range { return Range{Start: r.intervalStart(i), End: r.index[i].end} }

func (r *Reader) intervalStart(i int) int64 {
	if i == 0 {
		return r.f.dataPos
	}
	return r.index[i-1].end
}

// lastBefore is the last offset before interval i.
func (r *Reader) lastBefore(i int) int64 {
	if i == 0 {
		return r.f.firstOffset - 1
	}
	return r.index[i-1].last
}

// Find returns the index interval holding the first batch whose last offset
// is ≥ offset: the batch holding offset, or, when offset falls in a gap of
// a compacted segment or before its first offset, the first batch after it.
// It is one binary search over the in-memory index, no I/O. ErrOutOfRange:
// offset is above the segment's last offset.
func (r *Reader) Find(offset int64) (Range, error) {
	if offset > r.f.lastOffset {
		return Range{}, fmt.Errorf("%w: offset %d, the segment ends at %d", ErrOutOfRange, offset, r.f.lastOffset)
	}
	i := sort.Search(len(r.index), func(i int) bool { return r.index[i].last >= offset })
	return r.Interval(i), nil
}

// FindTime returns the index interval holding the first batch whose max
// timestamp is ≥ ts — where a Kafka ListOffsets by timestamp starts looking
// for the first record at or after ts. No I/O. ErrNoTimestamp: ts is above
// the segment's max timestamp.
//
// Why one interval suffices: the time index has an entry (T, O) at the
// first interval boundary and at every later boundary where the running max
// timestamp grew, T being that running max and O the boundary's last offset.
// Let (T, O) be the first entry with T ≥ ts and i the interval ending at O.
// At the boundary before interval i the running max was below ts: it equals
// the previous entry's T (entries are made whenever it grows), or, for i =
// 0, there is no earlier batch. So no batch before interval i reaches ts and
// some batch up to O does.
func (r *Reader) FindTime(ts int64) (Range, error) {
	if ts > r.f.maxTimestamp {
		return Range{}, fmt.Errorf("%w: %d, the segment's max timestamp is %d", ErrNoTimestamp, ts, r.f.maxTimestamp)
	}
	k := sort.Search(len(r.times), func(k int) bool { return r.times[k].ts >= ts })
	o := r.times[k].offset
	i := sort.Search(len(r.index), func(i int) bool { return r.index[i].last >= o }) // == o: checked by Open
	return r.Interval(i), nil
}

// Next returns the interval that starts where rng ends, and false at the
// end of the data (or if rng.End is not an interval boundary).
func (r *Reader) Next(rng Range) (Range, bool) {
	i, ok := r.boundary(rng.End)
	if !ok || i+1 >= len(r.index) {
		return Range{}, false
	}
	return r.Interval(i + 1), true
}

// Extend grows rng by the intervals that follow it while its length stays
// at most maxBytes: one ranged GET for a fetch of up to maxBytes. It
// returns rng unchanged when the next interval does not fit, at the end of
// the data, or if rng.End is not an interval boundary.
func (r *Reader) Extend(rng Range, maxBytes int64) Range {
	i, ok := r.boundary(rng.End)
	if !ok {
		return rng
	}
	// The last interval j > i whose end fits.
	j := sort.Search(len(r.index), func(j int) bool { return r.index[j].end-rng.Start > maxBytes }) - 1
	if j > i {
		rng.End = r.index[j].end
	}
	return rng
}

// boundary returns the index entry ending at pos (the data start is
// boundary -1).
func (r *Reader) boundary(pos int64) (int, bool) {
	if pos == r.f.dataPos {
		return -1, true
	}
	i := sort.Search(len(r.index), func(i int) bool { return r.index[i].end >= pos })
	return i, i < len(r.index) && r.index[i].end == pos
}

// intervals returns the first and last interval of rng, which must be a
// non-empty run of whole intervals.
func (r *Reader) intervals(rng Range) (first, last int, err error) {
	s, ok1 := r.boundary(rng.Start)
	e, ok2 := r.boundary(rng.End)
	if !ok1 || !ok2 || e <= s {
		return 0, 0, invalidf("range [%d, %d) is not a run of index intervals of this segment", rng.Start, rng.End)
	}
	return s + 1, e, nil
}

// ReadRange reads rng's bytes — one ReadAt — into buf if it is large
// enough, else into a new buffer, for Batches. rng must be a run of whole
// intervals (ErrInvalid otherwise).
func (r *Reader) ReadRange(rng Range, buf []byte) ([]byte, error) {
	if _, _, err := r.intervals(rng); err != nil {
		return nil, err
	}
	if int64(cap(buf)) >= rng.Len() {
		buf = buf[:rng.Len()]
	} else {
		buf = make([]byte, rng.Len())
	}
	if err := readAt(r.ra, buf, rng.Start); err != nil {
		return nil, err
	}
	return buf, nil
}
