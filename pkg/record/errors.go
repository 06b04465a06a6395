package record

import (
	"errors"
	"fmt"
)

// Error classes. Every *FormatError wraps exactly one of them, so callers can
// branch with errors.Is and still report the field with errors.As.
var (
	// ErrInvalid: the batch is malformed (bad magic, inconsistent lengths or
	// counts, bad attributes, a record that does not decode, ...).
	ErrInvalid = errors.New("record: invalid batch")

	// ErrCorrupt: the CRC does not match. Kafka treats this as
	// CORRUPT_MESSAGE, which a client may retry (the bytes may have been
	// damaged in transit).
	ErrCorrupt = errors.New("record: batch checksum mismatch")

	// ErrLimit: the batch breaks a bound in Limits (size, records, key,
	// value, headers, decompressed size).
	ErrLimit = errors.New("record: limit exceeded")
)

// Builder errors (not *FormatError: the caller did nothing wrong).
var (
	// ErrBatchFull: the record does not fit the batch under construction;
	// build the batch and append the record to the next one.
	ErrBatchFull = errors.New("record: batch full")

	// ErrEmptyBatch: Build was called with no records appended.
	ErrEmptyBatch = errors.New("record: empty batch")
)

// FormatError reports what is wrong with a batch or record, naming the field
// in the wire-format spelling used in the package doc, e.g. "crc",
// "attributes", "lastOffsetDelta", "records[3].key",
// "records[0].headers[2].key". The ingest layer maps it to INVALID_ARGUMENT
// with the field.
type FormatError struct {
	Field  string // which field, e.g. "recordCount" or "records[7].value"
	Reason string // what is wrong, and what is allowed
	Err    error  // the class: ErrInvalid, ErrCorrupt or ErrLimit
	// With ErrLimit: the Limits field that was broken ("MaxValueBytes"),
	// the size or count found (-1 when it is only known to be larger) and
	// the limit, so a server can word the error in its users' terms.
	Limit    string
	Got, Max int
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("record batch: %s: %s", e.Field, e.Reason)
}

// Unwrap returns the error class, so errors.Is(err, ErrLimit) etc. work.
func (e *FormatError) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) *FormatError {
	return &FormatError{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

func tooLarge(field, limitName string, got, limit int) *FormatError {
	return &FormatError{Field: field, Reason: fmt.Sprintf("%d exceeds the limit of %d", got, limit), Err: ErrLimit, Limit: limitName, Got: got, Max: limit}
}

// recordField names field of record i (and header j when j >= 0). Only
// called on error paths.
func recordField(i, j int, field string) string {
	if j >= 0 {
		return fmt.Sprintf("records[%d].headers[%d].%s", i, j, field)
	}
	return fmt.Sprintf("records[%d].%s", i, field)
}
