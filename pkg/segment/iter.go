package segment

import (
	"github.com/sluicemq/sluice/pkg/record"
)

// Iterator walks the batches of a range read from a segment, checking
// each index interval's CRC32C before returning any batch of it, then each
// batch's framing, magic and own CRC, and that its offsets lie where the
// index says. A batch it returns is byte for byte what the writer was
// given; any damage stops it with ErrCorrupt. Use it as:
//
//	data, err := r.ReadRange(rng, buf)
//	it := r.Batches(rng, data)
//	for it.Next() {
//		b := it.Batch() // aliases data
//	}
//	if err := it.Err(); err != nil { ... }
//
// Not safe for concurrent use; one per goroutine.
type Iterator struct {
	r     *Reader
	data  []byte
	start int64 // object position of data[0]
	i     int   // the interval being walked
	last  int   // the range's last interval
	ivEnd int   // where interval i ends in data
	pos   int   // next batch in data
	prev  int64 // last offset of the previous batch
	batch record.Batch
	bpos  int64
	err   error
}

// Batches returns an iterator over the batches of rng, whose bytes are
// data (as ReadRange returns them). rng must be a run of whole intervals
// of this segment and data exactly its length; otherwise the iterator's
// Err is ErrInvalid.
func (r *Reader) Batches(rng Range, data []byte) *Iterator {
	it := &Iterator{r: r, data: data, start: rng.Start}
	first, last, err := r.intervals(rng)
	switch {
	case err != nil:
		it.err = err
	case int64(len(data)) != rng.Len():
		it.err = invalidf("range [%d, %d) is %d bytes, data %d", rng.Start, rng.End, rng.Len(), len(data))
	default:
		it.i, it.last = first-1, last
	}
	return it
}

// Next advances to the next batch. It returns false at the end of the
// range or on an error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	it.batch = nil
	if it.pos == it.ivEnd {
		if it.i == it.last {
			return false
		}
		if err := it.enter(it.i + 1); err != nil {
			it.err = err
			return false
		}
	}
	r, e := it.r, &it.r.index[it.i]
	bpos := it.start + int64(it.pos)
	bad := func(cause error, format string, args ...any) bool {
		ce := corruptf(SectionData, bpos, format, args...)
		ce.Err = cause
		it.err = ce
		return false
	}
	bt, _, err := record.Split(it.data[it.pos:it.ivEnd])
	if err == nil {
		err = record.Verify(bt)
	}
	if err != nil {
		return bad(err, "interval %d: batch does not decode", it.i)
	}
	if err := checkBatch(bt, it.prev); err != nil {
		return bad(nil, "interval %d: %v", it.i, err)
	}
	first := it.pos == int(r.intervalStart(it.i)-it.start)
	end := it.pos + len(bt)
	switch {
	case it.i == 0 && first && bt.BaseOffset() != r.f.firstOffset:
		return bad(nil, "first batch has base offset %d, the footer says %d", bt.BaseOffset(), r.f.firstOffset)
	case bt.LastOffset() > e.last || end == it.ivEnd && bt.LastOffset() != e.last:
		return bad(nil, "interval %d: batch ends at offset %d, the index says the interval ends at %d", it.i, bt.LastOffset(), e.last)
	case bt.MaxTimestamp() > r.f.maxTimestamp:
		return bad(nil, "max timestamp %d above the footer's %d", bt.MaxTimestamp(), r.f.maxTimestamp)
	}
	it.batch, it.bpos, it.prev, it.pos = bt, bpos, bt.LastOffset(), end
	return true
}

// enter starts interval i: its bytes must match the index CRC.
func (it *Iterator) enter(i int) error {
	r := it.r
	start, e := r.intervalStart(i), &r.index[i]
	iv := it.data[start-it.start : e.end-it.start]
	if got := checksum(iv); got != e.crc {
		return corruptf(SectionData, start, "interval %d: crc stored %#08x, computed %#08x", i, e.crc, got)
	}
	it.i, it.ivEnd, it.prev = i, int(e.end-it.start), r.lastBefore(i)
	return nil
}

// Batch returns the batch Next found. It aliases the range's data.
func (it *Iterator) Batch() record.Batch { return it.batch }

// Pos returns the object position of the batch Next found.
func (it *Iterator) Pos() int64 { return it.bpos }

// Interval returns the index interval of the batch Next found.
func (it *Iterator) Interval() int { return it.i }

// Err returns the error that stopped the iterator, if any.
func (it *Iterator) Err() error { return it.err }
