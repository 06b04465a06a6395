package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ReaderConfig bounds what a Reader accepts. Zero fields take the defaults;
// Validate reports every violation at once.
type ReaderConfig struct {
	// MaxLineBytes bounds one line without its newline. Zero means
	// DefaultMaxLineBytes; within [MinMaxLineBytes, MaxLineBytesLimit].
	MaxLineBytes int
	// MaxOps bounds the ops after the header. Zero means DefaultMaxOps; at
	// most MaxOpsLimit.
	MaxOps int
}

func (c ReaderConfig) withDefaults() ReaderConfig {
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.MaxOps == 0 {
		c.MaxOps = DefaultMaxOps
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c ReaderConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MaxLineBytes < MinMaxLineBytes || c.MaxLineBytes > MaxLineBytesLimit {
		errs = append(errs, fmt.Errorf("MaxLineBytes %d outside [%d, %d]", c.MaxLineBytes, MinMaxLineBytes, MaxLineBytesLimit))
	}
	if c.MaxOps < 1 || c.MaxOps > MaxOpsLimit {
		errs = append(errs, fmt.Errorf("MaxOps %d outside [1, %d]", c.MaxOps, MaxOpsLimit))
	}
	if len(errs) > 0 {
		return fmt.Errorf("history: invalid reader config: %w", errors.Join(errs...))
	}
	return nil
}

// Reader decodes a history line by line, in constant memory (one line of at
// most MaxLineBytes). Every op it returns is valid (Op.Validate), and times
// never decrease from line to line. Malformed input ends the history with a
// *FormatError naming the line and, where there is one, the field.
type Reader struct {
	cfg    ReaderConfig
	br     *bufio.Reader
	header Header
	line   int   // number of the last line read; the header is line 1
	ops    int   // ops returned
	last   int64 // time of the previous op
	err    error // sticky
}

// NewReader reads and checks the header.
func NewReader(r io.Reader, cfg ReaderConfig) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// One byte more than a line, for its newline: ReadSlice then fails with
	// ErrBufferFull exactly for lines that are too long.
	hr := &Reader{cfg: cfg, br: bufio.NewReaderSize(r, cfg.MaxLineBytes+1)}
	line, err := hr.readLine()
	if err == io.EOF {
		return nil, &FormatError{Line: 1, Msg: "empty input: no header"}
	}
	if err != nil {
		return nil, err
	}
	if err := decodeStrict(line, &hr.header); err != nil {
		return nil, atLine(err, 1)
	}
	h := hr.header
	switch {
	case h.Format != Format:
		return nil, &FormatError{Line: 1, Field: "format", Msg: fmt.Sprintf("%q is not %q: not a history file", h.Format, Format)}
	case h.Version < MinVersion || h.Version > Version:
		return nil, &FormatError{Line: 1, Field: "version", Msg: fmt.Sprintf("unsupported version %d (this reader knows %d to %d)", h.Version, MinVersion, Version)}
	case h.Start.IsZero():
		return nil, &FormatError{Line: 1, Field: "start", Msg: "missing"}
	}
	return hr, nil
}

// Header returns the history's header.
func (r *Reader) Header() Header { return r.header }

// Line returns the line number of the op Next returned last (the header is
// line 1, so the first op is line 2).
func (r *Reader) Line() int { return r.line }

// Next returns the next op, io.EOF after the last one, or the first error
// (and the same error on every later call).
func (r *Reader) Next() (Op, error) {
	if r.err != nil {
		return Op{}, r.err
	}
	op, err := r.next()
	if err != nil {
		r.err = err
	}
	return op, err
}

func (r *Reader) next() (Op, error) {
	line, err := r.readLine()
	if err != nil {
		return Op{}, err
	}
	if r.ops == r.cfg.MaxOps {
		return Op{}, fmt.Errorf("%w: line %d: more than %d ops", ErrTooManyOps, r.line, r.cfg.MaxOps)
	}
	op, err := unmarshalOp(line)
	if err != nil {
		return Op{}, atLine(err, r.line)
	}
	if op.Kind == Fault && r.header.Version < 2 {
		return Op{}, &FormatError{Line: r.line, Field: "op", Msg: "fault ops exist from version 2 on; this file is version 1"}
	}
	if int64(op.Time) < r.last {
		return Op{}, &FormatError{Line: r.line, Field: "time", Msg: fmt.Sprintf("%d is before the previous line's %d: lines must be in completion order", op.Time, r.last)}
	}
	r.last = int64(op.Time)
	r.ops++
	return op, nil
}

// readLine returns the next line without its newline; the slice is valid
// until the next call.
func (r *Reader) readLine() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	switch {
	case err == nil:
		r.line++
		return b[:len(b)-1], nil
	case errors.Is(err, bufio.ErrBufferFull) || (err == io.EOF && len(b) > r.cfg.MaxLineBytes):
		r.line++
		return nil, &FormatError{Line: r.line, Msg: fmt.Sprintf("line longer than %d bytes", r.cfg.MaxLineBytes)}
	case err == io.EOF && len(b) > 0:
		// A last line without its newline: accept it if it decodes (a torn
		// line fails to decode and is reported as such).
		r.line++
		return b, nil
	case err == io.EOF:
		return nil, io.EOF
	default:
		return nil, fmt.Errorf("history: read line %d: %w", r.line+1, err)
	}
}

// atLine sets the line number of a *FormatError.
func atLine(err error, line int) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		c := *fe
		c.Line = line
		return &c
	}
	return err
}
