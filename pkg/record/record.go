package record

import (
	"math"
	"unicode/utf8"
)

// Record is one record. nil and empty are different: a nil Key is Kafka's
// null key, a nil Value is a tombstone, and both survive a round trip.
type Record struct {
	// Offset is set by the Iterator (batch base offset + offset delta);
	// the Builder ignores it.
	Offset int64
	// Timestamp in milliseconds since the Unix epoch; never negative.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is one record header. Keys are UTF-8 and need not be unique; a nil
// Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// bytesLen is the length prefix of a nullable byte string.
func bytesLen(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// recordBodySize is the encoded size of a record after its length varint.
func recordBodySize(r *Record, tsDelta int64, offsetDelta int32) int {
	n := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta))
	n += varintLen(bytesLen(r.Key)) + len(r.Key)
	n += varintLen(bytesLen(r.Value)) + len(r.Value)
	n += varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key)
		n += varintLen(bytesLen(h.Value)) + len(h.Value)
	}
	return n
}

// appendRecord encodes r; body is recordBodySize(r, tsDelta, offsetDelta).
func appendRecord(dst []byte, r *Record, tsDelta int64, offsetDelta int32, body int) []byte {
	dst = appendVarint(dst, int64(body))
	dst = append(dst, 0) // attributes: unused
	dst = appendVarint(dst, tsDelta)
	dst = appendVarint(dst, int64(offsetDelta))
	dst = appendVarint(dst, bytesLen(r.Key))
	dst = append(dst, r.Key...)
	dst = appendVarint(dst, bytesLen(r.Value))
	dst = append(dst, r.Value...)
	dst = appendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = appendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendVarint(dst, bytesLen(h.Value))
		dst = append(dst, h.Value...)
	}
	return dst
}

// checkRecord holds r (record i of a batch) to the per-record limits. The
// Builder uses it so that anything it accepts, Validate accepts too.
func checkRecord(r *Record, i int, lim *Limits) error {
	if r.Timestamp < 0 {
		return invalid(recordField(i, -1, "timestamp"), "%d is negative", r.Timestamp)
	}
	if len(r.Key) > lim.MaxKeyBytes {
		return tooLarge(recordField(i, -1, "key"), "MaxKeyBytes", len(r.Key), lim.MaxKeyBytes)
	}
	if len(r.Value) > lim.MaxValueBytes {
		return tooLarge(recordField(i, -1, "value"), "MaxValueBytes", len(r.Value), lim.MaxValueBytes)
	}
	if len(r.Headers) > lim.MaxHeaders {
		return tooLarge(recordField(i, -1, "headers"), "MaxHeaders", len(r.Headers), lim.MaxHeaders)
	}
	for j := range r.Headers {
		h := &r.Headers[j]
		if len(h.Key) > lim.MaxHeaderKeyBytes {
			return tooLarge(recordField(i, j, "key"), "MaxHeaderKeyBytes", len(h.Key), lim.MaxHeaderKeyBytes)
		}
		if !utf8.ValidString(h.Key) {
			return invalid(recordField(i, j, "key"), "not valid UTF-8")
		}
		if len(h.Value) > lim.MaxHeaderValueBytes {
			return tooLarge(recordField(i, j, "value"), "MaxHeaderValueBytes", len(h.Value), lim.MaxHeaderValueBytes)
		}
	}
	return nil
}

// recordDecoder decodes the records section of one batch, record by record,
// holding each to the limits. It never panics on any input.
type recordDecoder struct {
	src         []byte // the (decompressed) records section
	pos         int
	i           int   // index of the next record
	baseOffset  int64 // batch base offset
	baseTs      int64
	appendTime  int64 // maxTimestamp when the batch uses LogAppendTime, else -1
	lastDelta   int32 // lastOffsetDelta
	prevDelta   int64 // offset delta of the previous record, -1 before the first
	lim         *Limits
	denseDeltas bool // offset deltas must be exactly 0, 1, 2, ... (client batches)
}

// next decodes record d.i into r. Key, Value and header values alias d.src.
func (d *recordDecoder) next(r *Record) error {
	i := d.i
	field := func(f string) string { return recordField(i, -1, f) }
	length, n, ok := readVarint(d.src[d.pos:])
	if !ok {
		return invalid(field("length"), "bad varint (truncated records section or too long)")
	}
	if length < minRecordSize-1 || int(length) > len(d.src)-d.pos-n {
		return invalid(field("length"), "%d, but %d bytes remain in the records section", length, len(d.src)-d.pos-n)
	}
	b := d.src[d.pos+n : d.pos+n+int(length)]
	d.pos += n + int(length)
	d.i++

	if b[0] != 0 {
		return invalid(field("attributes"), "%d, record attributes are unused and must be 0", b[0])
	}
	p := 1
	tsDelta, n, ok := readVarlong(b[p:])
	if !ok {
		return invalid(field("timestampDelta"), "bad varlong")
	}
	p += n
	offDelta, n, ok := readVarint(b[p:])
	if !ok {
		return invalid(field("offsetDelta"), "bad varint")
	}
	p += n
	switch {
	case d.denseDeltas && int64(offDelta) != int64(i):
		return invalid(field("offsetDelta"), "%d, want %d (offset deltas count 0, 1, 2, ...)", offDelta, i)
	case int64(offDelta) <= d.prevDelta || offDelta > d.lastDelta:
		return invalid(field("offsetDelta"), "%d, want increasing deltas up to lastOffsetDelta %d", offDelta, d.lastDelta)
	}
	d.prevDelta = int64(offDelta)
	r.Offset = d.baseOffset + int64(offDelta)

	if d.appendTime >= 0 {
		r.Timestamp = d.appendTime
	} else {
		if (tsDelta > 0 && d.baseTs > math.MaxInt64-tsDelta) || (tsDelta < 0 && d.baseTs < math.MinInt64-tsDelta) {
			return invalid(field("timestampDelta"), "%d overflows the base timestamp", tsDelta)
		}
		r.Timestamp = d.baseTs + tsDelta
	}

	var err error
	if r.Key, p, err = readBytes(b, p, i, -1, "key", d.lim.MaxKeyBytes); err != nil {
		return err
	}
	if r.Value, p, err = readBytes(b, p, i, -1, "value", d.lim.MaxValueBytes); err != nil {
		return err
	}
	count, n, ok := readVarint(b[p:])
	switch {
	case !ok:
		return invalid(field("headers"), "bad header count varint")
	case count < 0:
		return invalid(field("headers"), "negative header count %d", count)
	case int(count) > d.lim.MaxHeaders:
		return tooLarge(field("headers"), "MaxHeaders", int(count), d.lim.MaxHeaders)
	case int(count)*2 > len(b)-p-n: // each header takes at least 2 bytes
		return invalid(field("headers"), "%d headers cannot fit in %d bytes", count, len(b)-p-n)
	}
	p += n
	r.Headers = nil
	if count > 0 {
		r.Headers = make([]Header, count)
	}
	for j := range r.Headers {
		h := &r.Headers[j]
		var key []byte
		if key, p, err = readBytes(b, p, i, j, "key", d.lim.MaxHeaderKeyBytes); err != nil {
			return err
		}
		if key == nil {
			return invalid(recordField(i, j, "key"), "null header key")
		}
		if !utf8.Valid(key) {
			return invalid(recordField(i, j, "key"), "not valid UTF-8")
		}
		h.Key = string(key)
		if h.Value, p, err = readBytes(b, p, i, j, "value", d.lim.MaxHeaderValueBytes); err != nil {
			return err
		}
	}
	if p != len(b) {
		return invalid(field("length"), "%d bytes left over after the record's fields", len(b)-p)
	}
	return nil
}

// limitName names the Limits field that bounds a record's key or value
// (j < 0) or a header's (j ≥ 0).
func limitName(name string, j int) string {
	switch {
	case j < 0 && name == "key":
		return "MaxKeyBytes"
	case j < 0:
		return "MaxValueBytes"
	case name == "key":
		return "MaxHeaderKeyBytes"
	default:
		return "MaxHeaderValueBytes"
	}
}

// readBytes reads a nullable length-prefixed byte string at b[p:]: field
// name of record i (header j when j >= 0). A null string is returned as nil,
// an empty one as a non-nil empty slice.
func readBytes(b []byte, p, i, j int, name string, limit int) ([]byte, int, error) {
	n, m, ok := readVarint(b[p:])
	switch {
	case !ok:
		return nil, p, invalid(recordField(i, j, name), "bad length varint")
	case n < -1:
		return nil, p, invalid(recordField(i, j, name), "negative length %d", n)
	case n == -1:
		return nil, p + m, nil
	case int(n) > limit:
		return nil, p, tooLarge(recordField(i, j, name), limitName(name, j), int(n), limit)
	case int(n) > len(b)-p-m:
		return nil, p, invalid(recordField(i, j, name), "length %d runs past the end of the record", n)
	}
	p += m
	return b[p : p+int(n) : p+int(n)], p + int(n), nil
}
