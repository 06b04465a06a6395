package record

import (
	"errors"
	"fmt"
)

// Iterator decodes the records of a batch, decompressing it first when it is
// compressed. It checks what it reads (framing, magic, CRC, attributes,
// every record against the Limits, the count) but not the rules that only
// bind producers (see Validate), so it also reads batches written by the
// partition writer. Use it as:
//
//	it := record.NewIterator(limits)
//	if err := it.Reset(batch); err != nil { ... }
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// Record's Key, Value and header Values alias the batch (or the iterator's
// decompression buffer) and stay valid until the next Reset; do not modify
// them. An Iterator is not safe for concurrent use; reuse one per goroutine
// to reuse its buffer.
type Iterator struct {
	lim   Limits
	batch Batch
	buf   []byte // decompression buffer, reused across Resets
	dec   recordDecoder
	n     int // recordCount
	rec   Record
	err   error
}

// NewIterator returns an iterator holding batches to lim (zero fields take
// their defaults).
func NewIterator(lim Limits) *Iterator {
	return &Iterator{lim: lim.WithDefaults()}
}

// Reset starts iterating batch: it verifies the framing, magic and CRC,
// checks the header, and decompresses the records. Errors are
// *FormatErrors.
func (it *Iterator) Reset(batch []byte) error {
	it.batch, it.n, it.err = nil, 0, nil
	it.dec = recordDecoder{}
	if err := it.reset(batch); err != nil {
		it.err = err
		return err
	}
	return nil
}

func (it *Iterator) reset(batch []byte) error {
	if len(batch) > it.lim.MaxBatchBytes {
		return tooLarge("batchLength", "MaxBatchBytes", len(batch), it.lim.MaxBatchBytes)
	}
	if err := Verify(batch); err != nil {
		return err
	}
	b := Batch(batch)
	attrs := b.Attributes()
	if attrs&^attrKnown != 0 {
		return invalid("attributes", "unknown bits %#04x set", uint16(attrs&^attrKnown))
	}
	if attrs&AttrDeleteHorizon != 0 {
		return invalid("attributes", "delete-horizon batches (KIP-534) are not supported")
	}
	codec := attrs.Codec()
	if !codec.valid() {
		return invalid("attributes", "unknown compression codec %d", int8(codec))
	}
	count := b.RecordCount()
	switch {
	case count < 0:
		return invalid("recordCount", "%d is negative", count)
	case int(count) > it.lim.MaxRecords:
		return tooLarge("recordCount", "MaxRecords", int(count), it.lim.MaxRecords)
	case count > 0 && b.LastOffsetDelta() < count-1:
		return invalid("lastOffsetDelta", "%d is less than recordCount-1 = %d", b.LastOffsetDelta(), count-1)
	}

	recs := b.RawRecords()
	if codec != CodecNone {
		var err error
		it.buf, err = decompress(it.buf, codec, recs, it.lim.MaxDecompressedBytes)
		switch {
		case errors.Is(err, errDecompressedTooLarge):
			return &FormatError{Field: "records", Reason: fmt.Sprintf("%v decompressed size exceeds the limit of %d bytes", codec, it.lim.MaxDecompressedBytes), Err: ErrLimit,
				Limit: "MaxDecompressedBytes", Got: -1, Max: it.lim.MaxDecompressedBytes}
		case err != nil:
			return invalid("records", "%v decompression failed: %v", codec, err)
		}
		recs = it.buf
	} else if len(recs) > it.lim.MaxDecompressedBytes {
		return tooLarge("records", "MaxDecompressedBytes", len(recs), it.lim.MaxDecompressedBytes)
	}
	if int64(count)*minRecordSize > int64(len(recs)) {
		return invalid("recordCount", "%d records cannot fit in %d bytes", count, len(recs))
	}
	appendTime := int64(-1)
	if attrs.LogAppendTime() {
		appendTime = b.MaxTimestamp()
	}
	it.batch, it.n = b, int(count)
	it.dec = recordDecoder{
		src:        recs,
		baseOffset: b.BaseOffset(),
		baseTs:     b.BaseTimestamp(),
		appendTime: appendTime,
		lastDelta:  b.LastOffsetDelta(),
		prevDelta:  -1,
		lim:        &it.lim,
	}
	return nil
}

// Next decodes the next record. It returns false at the end of the batch or
// on an error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil || it.batch == nil {
		return false
	}
	if it.dec.i == it.n {
		if rest := len(it.dec.src) - it.dec.pos; rest != 0 {
			it.err = invalid("recordCount", "%d records decoded but %d bytes remain", it.n, rest)
		}
		return false
	}
	if it.dec.pos == len(it.dec.src) {
		it.err = invalid("recordCount", "%d, but the records section holds only %d records", it.n, it.dec.i)
		return false
	}
	if err := it.dec.next(&it.rec); err != nil {
		it.err = err
		return false
	}
	return true
}

// Record returns the record Next decoded. The struct is overwritten by the
// next call to Next; its byte slices stay valid until Reset.
func (it *Iterator) Record() *Record { return &it.rec }

// Index is the position in the batch of the record Next decoded.
func (it *Iterator) Index() int { return it.dec.i - 1 }

// Err is the error that stopped iteration, if any: a *FormatError.
func (it *Iterator) Err() error { return it.err }

// Batch is the batch being iterated.
func (it *Iterator) Batch() Batch { return it.batch }

// Decode returns all the records of a stored batch (see Iterator; it does
// not apply the producer rules of Validate). The records own their memory.
func Decode(batch []byte, lim Limits) ([]Record, error) {
	it := NewIterator(lim)
	if err := it.Reset(batch); err != nil {
		return nil, err
	}
	return collect(it)
}

// collect drains it into records that do not alias the iterator's buffer.
func collect(it *Iterator) ([]Record, error) {
	recs := make([]Record, 0, it.n)
	for it.Next() {
		r := *it.Record()
		if it.batch.Codec() == CodecNone {
			// Key and value alias the caller's batch; copy so the result
			// does not pin or share it. (Compressed batches decode into a
			// buffer owned by this iterator alone.)
			r.Key, r.Value = cloneBytes(r.Key), cloneBytes(r.Value)
			for j := range r.Headers {
				r.Headers[j].Value = cloneBytes(r.Headers[j].Value)
			}
		}
		recs = append(recs, r)
	}
	return recs, it.Err()
}

// cloneBytes copies b, keeping nil nil and empty empty.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
