package segment

import (
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/sluicemq/sluice/pkg/record"
)

// Writer streams one segment to an io.Writer: the header and the batches
// as they are appended (each Append is one Write of the caller's bytes, not
// copied), then the indexes, footer and trailer in one Write at Finish. It
// holds only the sparse indexes in memory, so the target can be an S3
// multipart upload of any size up to MaxSegmentBytes. Not safe for
// concurrent use.
//
// The bytes written are a valid segment only once Finish returned nil; a
// caller that gets an error from Append or Finish must discard the object
// (abort the upload).
type Writer struct {
	w    io.Writer
	opts WriterOptions
	err  error // sticky: ErrClosed after Finish or after a failed write

	pos     int64 // bytes written so far: the object position of the next byte
	batches int64 // batches appended
	records int64 // sum of their record counts
	first   int64 // base offset of the first batch
	last    int64 // last offset of the last batch; -1 before the first
	maxTs   int64 // running max of the batches' max timestamps
	dataCRC uint32

	ivStart int64 // object position where the open index interval starts
	ivCRC   uint32
	offIdx  []offsetEntry
	timeIdx []timeEntry
}

// NewWriter returns a Writer of the segment opts describes to w. It writes
// nothing until the first Append.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Writer{w: w, opts: opts.withDefaults(), last: -1, maxTs: math.MinInt64, pos: HeaderSize, ivStart: HeaderSize}, nil
}

// Size is the size of the segment so far: header and data written (the
// header counts from the start), without the indexes and footer Finish
// adds.
func (w *Writer) Size() int64 { return w.pos }

// Append writes one or more record batches back to back — typically one
// ledger entry's payload — exactly as given. Every batch must pass
// record.Verify (framing, magic, CRC) and carry offsets above those of the
// batch before it (gaps are allowed, as a compacted log has them); a batch
// that fails is refused with ErrInvalid and nothing of the call is
// written. ErrLimit: the batches would take the finished segment past
// MaxSegmentBytes; nothing is written and the segment can still be
// finished without them.
func (w *Writer) Append(batches []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(batches) == 0 {
		return invalidf("append: no batch")
	}
	// Check everything before writing anything.
	prev, n := w.last, 0
	for rest := batches; len(rest) > 0; n++ {
		bt, r, err := record.Split(rest)
		if err == nil {
			err = record.Verify(bt)
		}
		if err != nil {
			return fmt.Errorf("%w: append: batch %d: %w", ErrInvalid, n, err)
		}
		if err := checkBatch(bt, prev); err != nil {
			return fmt.Errorf("%w: append: batch %d: %s", ErrInvalid, n, err)
		}
		prev, rest = bt.LastOffset(), r
	}
	footerLen := int64(FooterFixedSize + len(w.opts.TopicID))
	entries := int64(len(w.offIdx)+n+1) * (OffsetEntrySize + TimeEntrySize)
	if end := w.pos + int64(len(batches)) + entries + footerLen + TrailerSize; end > w.opts.MaxSegmentBytes {
		return limitf("append: the segment would reach %d bytes, more than MaxSegmentBytes %d", end, w.opts.MaxSegmentBytes)
	}

	if w.batches == 0 {
		if err := w.write(appendHeader(nil)); err != nil {
			return err
		}
	}
	if err := w.write(batches); err != nil {
		return err
	}
	for rest := batches; len(rest) > 0; {
		bt, r, _ := record.Split(rest) // checked above
		w.add(bt)
		rest = r
	}
	return nil
}

// checkBatch holds a verified batch to what a segment needs: offsets that
// are non-negative, consistent and above prev, the last offset before it.
func checkBatch(bt record.Batch, prev int64) error {
	base, delta, count := bt.BaseOffset(), int64(bt.LastOffsetDelta()), int64(bt.RecordCount())
	switch {
	case len(bt) > record.MaxMaxBatchBytes:
		return fmt.Errorf("%d bytes, more than any batch may have (%d)", len(bt), record.MaxMaxBatchBytes)
	case base < 0:
		return fmt.Errorf("baseOffset %d is negative", base)
	case delta < 0:
		return fmt.Errorf("lastOffsetDelta %d is negative", delta)
	case base > math.MaxInt64-delta:
		return fmt.Errorf("baseOffset %d + lastOffsetDelta %d overflows", base, delta)
	case count < 0 || count > delta+1:
		return fmt.Errorf("recordCount %d outside [0, lastOffsetDelta+1 = %d]", count, delta+1)
	case base <= prev:
		return fmt.Errorf("baseOffset %d is not above the previous batch's last offset %d", base, prev)
	}
	return nil
}

// add accounts for a batch just written: stats, checksums and the indexes.
func (w *Writer) add(bt record.Batch) {
	if w.batches == 0 {
		w.first = bt.BaseOffset()
	}
	w.batches++
	w.records += int64(bt.RecordCount())
	w.last = bt.LastOffset()
	w.maxTs = max(w.maxTs, bt.MaxTimestamp())
	w.dataCRC = crc32.Update(w.dataCRC, castagnoli, bt)
	w.ivCRC = crc32.Update(w.ivCRC, castagnoli, bt)
	w.pos += int64(len(bt))
	if w.pos-w.ivStart >= int64(w.opts.IndexIntervalBytes) {
		w.closeInterval()
	}
}

// closeInterval ends the open interval at the last batch written. The time
// index gets an entry at the same boundary when the running max timestamp
// grew since its last entry, and always at the first boundary — FindTime
// relies on both (see Reader.FindTime).
func (w *Writer) closeInterval() {
	w.offIdx = append(w.offIdx, offsetEntry{last: w.last, end: w.pos, crc: w.ivCRC})
	if n := len(w.timeIdx); n == 0 || w.maxTs > w.timeIdx[n-1].ts {
		w.timeIdx = append(w.timeIdx, timeEntry{ts: w.maxTs, offset: w.last})
	}
	w.ivStart, w.ivCRC = w.pos, 0
}

// Finish writes the indexes, footer and trailer, and returns what the
// footer says. The Writer is closed afterwards. A segment needs at least
// one batch: without one Finish returns ErrInvalid, having written nothing.
func (w *Writer) Finish() (Info, error) {
	if w.err != nil {
		return Info{}, w.err
	}
	if w.batches == 0 {
		return Info{}, invalidf("finish: a segment needs at least one batch")
	}
	if w.pos > w.ivStart {
		w.closeInterval()
	}
	if len(w.offIdx) > w.opts.MaxIndexEntries {
		// Validate's sizing rule makes this impossible.
		panic(fmt.Sprintf("segment: %d index entries, more than MaxIndexEntries %d", len(w.offIdx), w.opts.MaxIndexEntries))
	}
	f := footer{
		ledgerID:     w.opts.LedgerID,
		partition:    w.opts.Partition,
		topicID:      w.opts.TopicID,
		firstOffset:  w.first,
		lastOffset:   w.last,
		recordCount:  w.records,
		batchCount:   w.batches,
		maxTimestamp: w.maxTs,
		dataPos:      HeaderSize,
		dataLen:      w.pos - HeaderSize,
		offIdxPos:    w.pos,
		offIdxCount:  len(w.offIdx),
		timeIdxCount: len(w.timeIdx),
		dataCRC:      w.dataCRC,
	}
	f.timeIdxPos = f.offIdxPos + int64(len(w.offIdx))*OffsetEntrySize
	buf := make([]byte, 0, len(w.offIdx)*OffsetEntrySize+len(w.timeIdx)*TimeEntrySize+f.size()+TrailerSize)
	for _, e := range w.offIdx {
		buf = appendOffsetEntry(buf, e)
	}
	f.offIdxCRC = checksum(buf)
	for _, e := range w.timeIdx {
		buf = appendTimeEntry(buf, e)
	}
	f.timeIdxCRC = checksum(buf[f.timeIdxPos-f.offIdxPos:])
	fpos := len(buf)
	buf = appendFooter(buf, &f)
	buf = appendTrailer(buf, trailer{footerLen: f.size(), version: Version, footerCRC: checksum(buf[fpos:])})
	if err := w.write(buf); err != nil {
		return Info{}, err
	}
	w.pos += int64(len(buf))
	w.err = fmt.Errorf("%w: finished", ErrClosed)
	return newInfo(&f, Version, w.pos, len(w.offIdx), len(w.timeIdx)), nil
}

// write writes b in one call; a failure closes the Writer.
func (w *Writer) write(b []byte) error {
	n, err := w.w.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("%w: an earlier write failed: %w", ErrClosed, err)
		return fmt.Errorf("segment: write: %w", err)
	}
	return nil
}
