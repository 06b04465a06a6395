package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Limits and defaults of Config and ReaderConfig.
const (
	DefaultMaxLineBytes = 64 << 10
	MinMaxLineBytes     = 256
	MaxLineBytesLimit   = 16 << 20

	DefaultBufferBytes = 256 << 10
	MaxBufferBytes     = 64 << 20

	DefaultMaxOps = 10_000_000
	MaxOpsLimit   = 1 << 30
)

// Config configures a Recorder. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Config struct {
	// Scenario and Seed go into the header.
	Scenario string
	Seed     int64
	// Start is the wall-clock time of time zero, for the header. Zero means
	// time.Now() at NewRecorder.
	Start time.Time
	// Clock returns the time since time zero. It must not go backwards
	// (the Recorder never stamps a time before the previous one anyway).
	// Nil means a monotonic clock started by NewRecorder. Tests pass a fake.
	Clock func() time.Duration
	// BufferBytes bounds the bytes buffered before they are written to the
	// writer. Zero means DefaultBufferBytes; at least MaxLineBytes+1, at
	// most MaxBufferBytes.
	BufferBytes int
	// MaxLineBytes bounds one line (without its newline); Record refuses a
	// longer op with ErrLineTooLong. Zero means DefaultMaxLineBytes; within
	// [MinMaxLineBytes, MaxLineBytesLimit]. A Reader must allow at least as
	// much to read the history back.
	MaxLineBytes int
}

func (c Config) withDefaults() Config {
	if c.BufferBytes == 0 {
		c.BufferBytes = DefaultBufferBytes
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MaxLineBytes < MinMaxLineBytes || c.MaxLineBytes > MaxLineBytesLimit {
		errs = append(errs, fmt.Errorf("MaxLineBytes %d outside [%d, %d]", c.MaxLineBytes, MinMaxLineBytes, MaxLineBytesLimit))
	}
	if c.BufferBytes <= c.MaxLineBytes || c.BufferBytes > MaxBufferBytes {
		errs = append(errs, fmt.Errorf("BufferBytes %d outside [MaxLineBytes+1 = %d, %d]", c.BufferBytes, c.MaxLineBytes+1, MaxBufferBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("history: invalid recorder config: %w", errors.Join(errs...))
	}
	return nil
}

// Recorder writes a history: the header, then one JSON line per op, through
// a buffer of at most Config.BufferBytes. It is safe for concurrent use.
//
// Record stamps each op's completion time under the Recorder's lock, so the
// lines are in completion order and their times never decrease. The stamp
// is at or after the real completion (the caller records after it saw the
// answer), which only widens the op's [Invoke, Time] window: every check
// that uses time stays sound.
//
// Nothing is dropped silently. An op that does not validate or does not fit
// a line is refused with an error and not written; once the writer fails,
// every later call returns the same ErrWrite.
type Recorder struct {
	cfg    Config
	header Header

	mu     sync.Mutex
	bw     *bufio.Writer // bounded by cfg.BufferBytes
	last   time.Duration // the last stamped time
	err    error         // sticky: the first write error, or ErrClosed
	closed bool
}

// NewRecorder starts a history on w and buffers its header. The Recorder
// never closes w.
func NewRecorder(w io.Writer, cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	if cfg.Clock == nil {
		start := time.Now()
		cfg.Clock = func() time.Duration { return time.Since(start) }
	}
	r := &Recorder{
		cfg: cfg,
		header: Header{
			Format:   Format,
			Version:  Version,
			Start:    cfg.Start.Round(0).UTC(),
			Scenario: cfg.Scenario,
			Seed:     cfg.Seed,
		},
		bw: bufio.NewWriterSize(w, cfg.BufferBytes),
	}
	line, err := json.Marshal(&r.header)
	if err != nil {
		return nil, fmt.Errorf("history: encode header: %w", err)
	}
	if len(line) > cfg.MaxLineBytes {
		return nil, fmt.Errorf("%w: header is %d bytes, limit %d", ErrLineTooLong, len(line), cfg.MaxLineBytes)
	}
	if err := r.writeLine(line); err != nil {
		return nil, err
	}
	return r, nil
}

// Header returns the history's header.
func (r *Recorder) Header() Header { return r.header }

// Now returns the current time since time zero. Callers read it just before
// invoking a produce, commit or reset, for Op.Invoke.
func (r *Recorder) Now() time.Duration { return r.cfg.Clock() }

// Record stamps op.Time with the current time and appends op to the
// history. op.Time must be zero: the Recorder owns completion times (see
// the type doc). It returns ErrInvalidOp or ErrLineTooLong without writing
// anything, or the sticky ErrWrite/ErrClosed.
func (r *Recorder) Record(op Op) error {
	if op.Time != 0 {
		return fmt.Errorf("%w: %s op with Time set (%v); the recorder stamps it", ErrInvalidOp, op.Kind, op.Time)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	now := max(r.cfg.Clock(), r.last)
	op.Time = now
	line, err := marshalOp(&op)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOp, err)
	}
	if len(line) > r.cfg.MaxLineBytes {
		return fmt.Errorf("%w: %s op is %d bytes, limit %d", ErrLineTooLong, op.Kind, len(line), r.cfg.MaxLineBytes)
	}
	if err := r.writeLine(line); err != nil {
		return err
	}
	r.last = now
	return nil
}

// writeLine buffers line and its newline, writing the buffer out when full.
// The caller holds mu (or owns r exclusively).
func (r *Recorder) writeLine(line []byte) error {
	_, err := r.bw.Write(line)
	if err == nil {
		err = r.bw.WriteByte('\n')
	}
	if err != nil {
		r.err = fmt.Errorf("%w: %w", ErrWrite, err)
		return r.err
	}
	return nil
}

// Flush writes everything buffered to the writer.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushLocked()
}

func (r *Recorder) flushLocked() error {
	if r.err != nil {
		return r.err
	}
	if err := r.bw.Flush(); err != nil {
		r.err = fmt.Errorf("%w: %w", ErrWrite, err)
		return r.err
	}
	return nil
}

// Close flushes the buffer and refuses later ops with ErrClosed. It returns
// the write error if any write failed, ever: a caller that checks only
// Close's error still learns that the history is incomplete. Closing twice
// returns nil the second time.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	err := r.flushLocked()
	r.closed = true
	if r.err == nil {
		r.err = ErrClosed
	}
	return err
}
