package ledger

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Defaults for zero Config fields.
const (
	DefaultMaxInFlight         = 1024    // the bookie protocol's per-stream bound
	DefaultMaxEntryBytes       = 8 << 20 // the bookie protocol's entry bound
	DefaultMaxEnsembleChanges  = 16
	DefaultRecoveryReadWindow  = 4
	DefaultMaxOutstandingReads = 1024
	// Upper bounds of the Config limits.
	MaxRecoveryReadWindow = 1024
	MaxMaxInFlight        = 1 << 16
	MaxMaxEntryBytes      = 64 << 20
	MaxMaxOutstanding     = 1 << 16
)

// Config configures the state machines of one ledger. Zero fields take the
// documented defaults; Validate reports every violation at once.
type Config struct {
	// Replication is the ledger's E, Qw and Qa (required):
	// catalog.MaxEnsembleSize >= E >= Qw >= Qa >= 1.
	Replication catalog.Replication

	// MaxInFlight bounds the entries a writer (or a recovery) has sent and
	// not yet seen acknowledged; Append beyond it fails with
	// ErrInFlightLimit. Zero means DefaultMaxInFlight; at most
	// MaxMaxInFlight.
	MaxInFlight int
	// MaxEntryBytes bounds one payload. Zero means DefaultMaxEntryBytes; at
	// most MaxMaxEntryBytes.
	MaxEntryBytes int
	// MaxEnsembleChanges bounds the ensemble changes one writer asks for
	// (failed attempts included). Zero means DefaultMaxEnsembleChanges; at
	// most catalog.MaxEnsembleSegments-1.
	MaxEnsembleChanges int
	// RecoveryReadWindow is how many entries recovery reads in parallel.
	// Zero means DefaultRecoveryReadWindow; at most MaxRecoveryReadWindow.
	RecoveryReadWindow int
	// MaxOutstandingReads bounds a reader's reads in progress. Zero means
	// DefaultMaxOutstandingReads; at most MaxMaxOutstanding.
	MaxOutstandingReads int
	// EagerLac makes an idle writer push its LAC to the bookies as soon as
	// an entry is acknowledged (nothing else pending would carry it),
	// instead of at the next quiet Tick. Tail readers then see an entry
	// within a round trip of its acknowledgement. Off, the push waits for a
	// Tick with no add in the interval before it.
	EagerLac bool

	// unsafe holds test-only switches that remove a safety measure, so tests
	// can show the simulation catches the bug it prevents (export_test.go).
	unsafe unsafeKnobs
}

type unsafeKnobs struct {
	// noReadFence sends recovery reads without the fence flag: BookKeeper
	// before PR #2616.
	noReadFence bool
	// readBelowSegment starts recovery reads at the highest LAC + 1 even
	// when that is below the last segment's first entry: BookKeeper before
	// PR #2654 (which, reading only the last segment's bookies, would
	// truncate the ledger).
	readBelowSegment bool
}

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxEnsembleChanges == 0 {
		c.MaxEnsembleChanges = DefaultMaxEnsembleChanges
	}
	if c.RecoveryReadWindow == 0 {
		c.RecoveryReadWindow = DefaultRecoveryReadWindow
	}
	if c.MaxOutstandingReads == 0 {
		c.MaxOutstandingReads = DefaultMaxOutstandingReads
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("ledger config %s: %s", field, fmt.Sprintf(format, args...)))
	}
	r := c.Replication
	if r.Ensemble < 1 || r.Ensemble > catalog.MaxEnsembleSize {
		bad("Replication.Ensemble", "%d is outside [1, %d]", r.Ensemble, catalog.MaxEnsembleSize)
	}
	if r.WriteQuorum < 1 || r.WriteQuorum > r.Ensemble {
		bad("Replication.WriteQuorum", "%d is outside [1, ensemble %d]", r.WriteQuorum, r.Ensemble)
	}
	if r.AckQuorum < 1 || r.AckQuorum > r.WriteQuorum {
		bad("Replication.AckQuorum", "%d is outside [1, write quorum %d]", r.AckQuorum, r.WriteQuorum)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > MaxMaxInFlight {
		bad("MaxInFlight", "%d is outside [1, %d]", c.MaxInFlight, MaxMaxInFlight)
	}
	if c.MaxEntryBytes < 1 || c.MaxEntryBytes > MaxMaxEntryBytes {
		bad("MaxEntryBytes", "%d is outside [1, %d]", c.MaxEntryBytes, MaxMaxEntryBytes)
	}
	if c.MaxEnsembleChanges < 1 || c.MaxEnsembleChanges > catalog.MaxEnsembleSegments-1 {
		bad("MaxEnsembleChanges", "%d is outside [1, %d]", c.MaxEnsembleChanges, catalog.MaxEnsembleSegments-1)
	}
	if c.RecoveryReadWindow < 1 || c.RecoveryReadWindow > MaxRecoveryReadWindow {
		bad("RecoveryReadWindow", "%d is outside [1, %d]", c.RecoveryReadWindow, MaxRecoveryReadWindow)
	}
	if c.MaxOutstandingReads < 1 || c.MaxOutstandingReads > MaxMaxOutstanding {
		bad("MaxOutstandingReads", "%d is outside [1, %d]", c.MaxOutstandingReads, MaxMaxOutstanding)
	}
	return errors.Join(errs...)
}

// validEnsemble checks an ensemble segment's bookie list: E distinct,
// non-empty ids.
func validEnsemble(bookies []string, e int) error {
	if len(bookies) != e {
		return fmt.Errorf("%w: ensemble has %d bookies, want %d", ErrInvalidEvent, len(bookies), e)
	}
	for i, b := range bookies {
		if b == "" {
			return fmt.Errorf("%w: ensemble position %d is empty", ErrInvalidEvent, i)
		}
		for _, o := range bookies[:i] {
			if o == b {
				return fmt.Errorf("%w: ensemble lists bookie %q twice", ErrInvalidEvent, b)
			}
		}
	}
	return nil
}
