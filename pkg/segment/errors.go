package segment

import (
	"errors"
	"fmt"
)

// The package's error taxonomy. Errors are wrapped with context; test them
// with errors.Is (and errors.As for *CorruptError).
var (
	// ErrCorrupt: the object failed a checksum, does not decode, or
	// contradicts itself (an index pointing outside the data, offsets out
	// of order, a short object). Never returned together with data. A
	// corrupt segment stays unreadable: nothing is skipped or repaired, the
	// caller reads the ledger from elsewhere or reports data loss. Every
	// ErrCorrupt is a *CorruptError naming the section.
	ErrCorrupt = errors.New("segment: corrupt")

	// ErrUnsupportedVersion: the trailer is intact but names a format
	// version this build does not read (written by a newer build).
	ErrUnsupportedVersion = errors.New("segment: unsupported format version")

	// ErrLimit: a segment would exceed, or an object exceeds, a configured
	// bound (MaxSegmentBytes, MaxIndexEntries). Not corruption: a reader
	// configured with larger limits may read it.
	ErrLimit = errors.New("segment: limit exceeded")

	// ErrInvalid: the caller passed something wrong — options out of
	// range, a batch that fails its own checks or is out of offset order,
	// a Range that is not a run of index intervals of this segment, a
	// buffer of the wrong length.
	ErrInvalid = errors.New("segment: invalid argument")

	// ErrOutOfRange: Find was asked for an offset above the segment's last
	// offset.
	ErrOutOfRange = errors.New("segment: offset out of range")

	// ErrNoTimestamp: FindTime was asked for a timestamp above the
	// segment's max timestamp: no batch in it has a record that late.
	ErrNoTimestamp = errors.New("segment: no batch at or after the timestamp")

	// ErrClosed: the Writer was finished, or failed earlier (then the
	// error wraps the first failure too).
	ErrClosed = errors.New("segment: writer closed")
)

// Sections of a segment object, as CorruptError names them.
const (
	SectionObject      = "object" // the object as a whole: size, short reads
	SectionHeader      = "header"
	SectionData        = "data"
	SectionOffsetIndex = "offset index"
	SectionTimeIndex   = "time index"
	SectionFooter      = "footer"
	SectionTrailer     = "trailer"
)

// CorruptError reports where a segment is corrupt. It wraps ErrCorrupt and,
// when there is one, the underlying cause (e.g. a *record.FormatError).
type CorruptError struct {
	Section string // one of the Section constants
	Pos     int64  // object position of the damaged structure, -1 if none
	Reason  string // what is wrong
	Err     error  // the cause, if any
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("segment: corrupt %s", e.Section)
	if e.Pos >= 0 {
		s += fmt.Sprintf(" at %d", e.Pos)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrCorrupt and the cause, so errors.Is works for both.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

func corruptf(section string, pos int64, format string, args ...any) *CorruptError {
	return &CorruptError{Section: section, Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func limitf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLimit, fmt.Sprintf(format, args...))
}
