package segment

import (
	"context"
	"hash/crc32"
	"math"
)

// verifyChunkBytes: Verify reads runs of intervals of up to this size (or
// one larger interval) at a time.
const verifyChunkBytes = 1 << 20

// Verify reads the whole object and checks everything Open could not: the
// header, every interval and batch (as an Iterator does), the data CRC,
// the footer's first offset, batch and record counts and max timestamp,
// and that the time index is exactly the one the writer derives from the
// batches. The offloader runs it on an uploaded object before the catalog
// points at it. Memory is bounded by max(1 MiB, the largest interval).
// Errors: ErrCorrupt (*CorruptError), the ReaderAt's errors, ctx's error.
func (r *Reader) Verify(ctx context.Context) error {
	var hdr [HeaderSize]byte
	if err := readAt(r.ra, hdr[:], 0); err != nil {
		return err
	}
	if err := checkHeader(hdr[:], r.version); err != nil {
		return err
	}
	var (
		buf              []byte
		dataCRC          uint32
		batches, records int64
		maxTs            int64 = math.MinInt64
		k                int   // the next time index entry
	)
	for i := 0; i < len(r.index); {
		if err := ctx.Err(); err != nil {
			return err
		}
		rng, j := r.Interval(i), i
		for j+1 < len(r.index) && r.index[j+1].end-rng.Start <= verifyChunkBytes {
			j++
		}
		rng.End = r.index[j].end
		var err error
		if buf, err = r.ReadRange(rng, buf); err != nil {
			return err
		}
		dataCRC = crc32.Update(dataCRC, castagnoli, buf)
		it := r.Batches(rng, buf)
		for it.Next() {
			bt := it.Batch()
			batches++
			records += int64(bt.RecordCount())
			maxTs = max(maxTs, bt.MaxTimestamp())
			if it.pos != it.ivEnd {
				continue
			}
			// Interval it.i ends here: the writer put a time entry at this
			// boundary iff it is the first or the running max grew.
			e := timeEntry{ts: maxTs, offset: r.index[it.i].last}
			want := k == 0 || maxTs > r.times[k-1].ts
			has := k < len(r.times) && r.times[k].offset == e.offset
			switch {
			case want && (!has || r.times[k] != e):
				return corruptf(SectionTimeIndex, r.f.timeIdxPos+int64(k)*TimeEntrySize, "entry %d: want {ts %d, offset %d} at the end of interval %d", k, e.ts, e.offset, it.i)
			case !want && has:
				return corruptf(SectionTimeIndex, r.f.timeIdxPos+int64(k)*TimeEntrySize, "entry %d at offset %d, where the running max timestamp did not grow", k, e.offset)
			case want:
				k++
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		i = j + 1
	}
	f := &r.f
	switch {
	case k != len(r.times):
		return corruptf(SectionTimeIndex, f.timeIdxPos, "%d entries, the batches make %d", len(r.times), k)
	case dataCRC != f.dataCRC:
		return corruptf(SectionData, f.dataPos, "crc stored %#08x, computed %#08x", f.dataCRC, dataCRC)
	case batches != f.batchCount || records != f.recordCount || maxTs != f.maxTimestamp:
		return corruptf(SectionFooter, -1, "footer says %d batches, %d records, max timestamp %d; the data has %d, %d, %d",
			f.batchCount, f.recordCount, f.maxTimestamp, batches, records, maxTs)
	}
	return nil
}
