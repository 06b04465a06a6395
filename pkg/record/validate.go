package record

import "sync"

// Validate checks a batch sent by a client — the "opaque batch" that ingest
// stores without re-encoding — and decodes every record to do so. It
// returns nil or a *FormatError naming the field. On top of what Iterator
// checks (framing against len(batch) exactly, magic 2, CRC-32C, known codec
// and attribute bits, limits, every record's encoding), a client batch must:
//
//   - hold at least one record, with lastOffsetDelta = recordCount-1 and
//     offset deltas 0, 1, 2, ... (offsets are assigned by SetBaseOffset, so
//     they must be dense);
//   - use CreateTime: LogAppendTime is the broker's to set;
//   - not be a control batch: commit/abort markers are the writer's to write;
//   - have non-negative timestamps, and maxTimestamp equal to the largest
//     record timestamp (readers trust it for time indexes and retention);
//   - carry coherent producer fields: producerId -1 (then epoch and
//     sequence are ignored, as Kafka does, and the batch may not be
//     transactional) or producerId, producerEpoch and baseSequence all ≥ 0.
//
// baseOffset and partitionLeaderEpoch are not checked: the writer overwrites
// them. Timestamp skew against the clock is the caller's policy, not a
// format rule. Zero fields of lim take their defaults.
func Validate(batch []byte, lim Limits) error {
	return ValidateEach(batch, lim, nil)
}

// Parse validates a client batch exactly as Validate does and returns its
// records, which own their memory.
func Parse(batch []byte, lim Limits) ([]Record, error) {
	it := NewIterator(lim)
	var recs []Record
	if err := validate(it, batch, &recs, nil); err != nil {
		return nil, err
	}
	return recs, nil
}

// ValidateEach validates batch as Validate does and calls fn with each
// record in order, once the record itself has passed. The record aliases
// the batch or a reused buffer: it is valid only during the call. An error
// from fn stops the walk and is returned as it is.
func ValidateEach(batch []byte, lim Limits, fn func(i int, r *Record) error) error {
	it := iterators.Get().(*Iterator)
	it.lim = lim.WithDefaults()
	err := validate(it, batch, nil, fn)
	// Keep the decompression buffer for the next call unless it is large;
	// drop every reference to the caller's batch.
	if cap(it.buf) > maxPooledBuffer {
		it.buf = nil
	}
	it.batch, it.dec, it.rec = nil, recordDecoder{}, Record{}
	iterators.Put(it)
	return err
}

// iterators lets Validate reuse decompression buffers. Validate keeps no
// record past its return, so sharing the buffer is safe.
var iterators = sync.Pool{New: func() any { return new(Iterator) }}

const maxPooledBuffer = 4 << 20

func validate(it *Iterator, batch []byte, out *[]Record, fn func(int, *Record) error) error {
	if err := it.Reset(batch); err != nil {
		return err
	}
	if err := checkClientHeader(it.batch); err != nil {
		return err
	}
	it.dec.denseDeltas = true
	maxTs := int64(-1)
	if out != nil {
		recs, err := collect(it)
		if err != nil {
			return err
		}
		for i := range recs {
			if err := checkTimestamp(recs[i].Timestamp, i); err != nil {
				return err
			}
			maxTs = max(maxTs, recs[i].Timestamp)
		}
		*out = recs
	} else {
		for it.Next() {
			r := it.Record()
			if err := checkTimestamp(r.Timestamp, it.Index()); err != nil {
				return err
			}
			maxTs = max(maxTs, r.Timestamp)
			if fn != nil {
				if err := fn(it.Index(), r); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	if got := it.batch.MaxTimestamp(); got != maxTs {
		return invalid("maxTimestamp", "%d, but the largest record timestamp is %d", got, maxTs)
	}
	return nil
}

func checkTimestamp(ts int64, i int) error {
	if ts < 0 {
		return invalid(recordField(i, -1, "timestampDelta"), "gives timestamp %d; timestamps must not be negative", ts)
	}
	return nil
}

// checkClientHeader applies the header rules that bind producers.
func checkClientHeader(b Batch) error {
	attrs := b.Attributes()
	switch {
	case attrs.LogAppendTime():
		return invalid("attributes", "LogAppendTime is set; clients must send CreateTime")
	case attrs.Control():
		return invalid("attributes", "control batches may not come from clients")
	}
	count := b.RecordCount()
	if count == 0 {
		return invalid("recordCount", "a batch must hold at least one record")
	}
	if d := b.LastOffsetDelta(); d != count-1 {
		return invalid("lastOffsetDelta", "%d, want recordCount-1 = %d", d, count-1)
	}
	if ts := b.BaseTimestamp(); ts < 0 {
		return invalid("baseTimestamp", "%d is negative", ts)
	}
	pid, epoch, seq := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	switch {
	case pid < NoProducerID:
		return invalid("producerId", "%d, want -1 (none) or ≥ 0", pid)
	case pid == NoProducerID && attrs.Transactional():
		return invalid("producerId", "a transactional batch needs a producer id")
	case pid >= 0 && epoch < 0:
		return invalid("producerEpoch", "%d is negative for producer id %d", epoch, pid)
	case pid >= 0 && seq < 0:
		return invalid("baseSequence", "%d is negative for producer id %d", seq, pid)
	}
	return nil
}
