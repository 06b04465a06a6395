package partlog

import (
	"slices"

	"github.com/sluicemq/sluice/pkg/record"
)

// appendPayload takes what lim asks of payload (record batches: an entry,
// or an interval of a segment): whole batches or decoded records.
func appendPayload(it *record.Iterator, payload []byte, next *int64, lim Limits, res *Result) (full bool, err error) {
	if lim.Batches {
		return appendBatches(it, payload, next, lim, res)
	}
	return appendRecords(it, payload, next, lim, res)
}

// appendBatches adds the whole batches of payload from *next on to res,
// within lim (see Limits.Batches), moving *next past each batch taken and
// each control or empty batch skipped. Batches taken one after another
// share one element of res.Batches. Every batch taken has its CRC
// verified: corruption is never sent on. full: a limit stopped it.
func appendBatches(it *record.Iterator, payload []byte, next *int64, lim Limits, res *Result) (full bool, err error) {
	run, runEnd := -1, 0 // the open run of batches taken: payload[run:runEnd]
	flush := func() {
		if run >= 0 {
			res.Batches = append(res.Batches, payload[run:runEnd:runEnd])
			run = -1
		}
	}
	hardRecs := lim.HardMaxRecords
	if hardRecs <= 0 {
		hardRecs = lim.MaxRecords
	}
	for pos := 0; pos < len(payload); {
		bt, _, err := record.Split(payload[pos:])
		if err != nil {
			return false, err
		}
		start := pos
		pos += len(bt)
		if bt.LastOffset() < *next {
			continue
		}
		if lim.control && !bt.Attributes().Control() {
			// The scan for markers passes over data batches: counted
			// against its limits, not returned, not verified here (a
			// read that delivers them verifies them).
			flush()
			covered := int(min(int64(bt.RecordCount()), bt.LastOffset()-max(bt.BaseOffset(), *next)+1))
			if res.Count > 0 && (res.Count+covered > lim.MaxRecords || res.Bytes+len(bt) > lim.MaxBytes) {
				return true, nil
			}
			res.Count += max(covered, 0)
			res.Bytes += len(bt)
			*next = bt.NextOffset()
			continue
		}
		if err := record.Verify(bt); err != nil {
			return false, err
		}
		if f := lim.txn; f != nil {
			stop, skip := f.take(bt)
			if stop {
				flush()
				return true, nil
			}
			if skip {
				flush() // an aborted transaction's batch, or a marker
				*next = bt.NextOffset()
				continue
			}
		}
		if bt.Attributes().Control() && lim.control {
			// The scan for markers takes them.
		} else if bt.Attributes().Control() || bt.RecordCount() <= 0 {
			flush() // transaction markers are not records; empty batches hold none
			*next = bt.NextOffset()
			continue
		}
		covered := int(min(int64(bt.RecordCount()), bt.LastOffset()-max(bt.BaseOffset(), *next)+1))
		switch {
		case res.Count == 0 && (covered > hardRecs || lim.HardMaxBytes > 0 && len(bt) > lim.HardMaxBytes):
			// The first batch cannot fit the credits: its records, as many
			// as fit.
			rl := lim
			rl.MaxRecords = min(lim.MaxRecords, hardRecs)
			if _, err := appendRecords(it, bt, next, rl, res); err != nil {
				return false, err
			}
			return true, nil
		case res.Count > 0 && (res.Count+covered > lim.MaxRecords || res.Bytes+len(bt) > lim.MaxBytes):
			flush()
			return true, nil
		}
		if run < 0 {
			run = start
		}
		runEnd = pos
		res.Count += covered
		res.Bytes += len(bt)
		*next = bt.NextOffset()
	}
	flush()
	return false, nil
}

// appendRecords decodes the records of payload (record batches: an entry,
// or an interval of a segment) from *next on into res, within lim, moving
// *next past each record taken and each control batch. full: a limit
// stopped it. An error is a batch that does not decode: corruption.
func appendRecords(it *record.Iterator, payload []byte, next *int64, lim Limits, res *Result) (full bool, err error) {
	for rest := payload; len(rest) > 0 && !full; {
		bt, r, err := record.Split(rest)
		if err != nil {
			return false, err
		}
		rest = r
		if bt.LastOffset() < *next {
			continue
		}
		if f := lim.txn; f != nil {
			stop, skip := f.take(bt)
			if stop {
				return true, nil
			}
			if skip {
				*next = bt.NextOffset() // an aborted transaction's batch, or a marker
				continue
			}
		}
		if bt.Attributes().Control() {
			*next = bt.NextOffset() // transaction markers are not records
			continue
		}
		if err := it.Reset(bt); err != nil {
			return false, err
		}
		copyOut := bt.Codec() != record.CodecNone // decompressed into the iterator's buffer
		for it.Next() {
			rec := it.Record()
			if rec.Offset < *next {
				continue
			}
			size := recordSize(rec)
			if len(res.Records) == 0 && lim.HardMaxBytes > 0 && size > lim.HardMaxBytes {
				full = true
				break
			}
			if len(res.Records) > 0 && (len(res.Records) >= lim.MaxRecords || res.Bytes+size > lim.MaxBytes) {
				full = true
				break
			}
			r := *rec
			if copyOut {
				r = cloneRecord(rec)
			} else if len(rec.Headers) > 0 {
				r.Headers = slices.Clone(rec.Headers)
			}
			res.Records = append(res.Records, r)
			res.Count++
			res.Bytes += size
			*next = rec.Offset + 1
		}
		if err := it.Err(); err != nil {
			return false, err
		}
	}
	return full, nil
}

func recordSize(r *record.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// RecordSize is the size a record counts for in limits and credits: key,
// value, header keys and values.
func RecordSize(r *record.Record) int { return recordSize(r) }

func cloneRecord(r *record.Record) record.Record {
	c := record.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
	if len(r.Headers) > 0 {
		c.Headers = make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = record.Header{Key: h.Key, Value: cloneBytes(h.Value)}
		}
	}
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
