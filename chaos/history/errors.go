package history

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrFormat matches every *FormatError: the input is not a valid
	// history (or an op is not a valid op).
	ErrFormat = errors.New("history: malformed")

	// ErrInvalidOp is returned by Recorder.Record for an op that does not
	// validate (it wraps the *FormatError). Nothing is written.
	ErrInvalidOp = errors.New("history: invalid op")

	// ErrLineTooLong is returned by Recorder.Record for an op whose line
	// would exceed Config.MaxLineBytes. Nothing is written.
	ErrLineTooLong = errors.New("history: line too long")

	// ErrWrite means writing the history failed. The Recorder refuses every
	// later op with the same error: a history with a hole in it proves
	// nothing, so the run must fail rather than carry on. It wraps the
	// writer's error.
	ErrWrite = errors.New("history: write failed")

	// ErrClosed is returned for ops recorded after Close.
	ErrClosed = errors.New("history: recorder closed")

	// ErrTooManyOps is returned by Reader.Next when the history holds more
	// ops than ReaderConfig.MaxOps.
	ErrTooManyOps = errors.New("history: too many ops")
)

// FormatError describes malformed input: which line (1 is the header; 0
// when validating an op outside a file), which JSON field ("" when the
// problem is the line as a whole), and what is wrong.
type FormatError struct {
	Line  int
	Field string
	Msg   string
	// Err is the underlying decoding error, if any.
	Err error
}

// Error reads "history: line 7: field "offset": negative (-1)". Without a
// line (an op validated on its own, which callers wrap) it is just
// "field "offset": negative (-1)".
func (e *FormatError) Error() string {
	s := ""
	if e.Line > 0 {
		s = "history: line " + strconv.Itoa(e.Line) + ": "
	}
	if e.Field != "" {
		s += "field " + strconv.Quote(e.Field) + ": "
	}
	return s + e.Msg
}

// Is makes every FormatError match ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

func (e *FormatError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) *FormatError {
	return &FormatError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
