package checker

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/chaos/history"
)

// Defaults and limits of Options.
const (
	DefaultMaxExamples = 10
	MaxExamplesLimit   = 10_000
)

// Options configures a check. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Options struct {
	// MaxExamples bounds the anomalies of each kind kept in
	// Result.Examples (all are counted). Zero means DefaultMaxExamples;
	// at most MaxExamplesLimit.
	MaxExamples int
	// Reader bounds the history read (line length, number of ops).
	Reader history.ReaderConfig
	// AllowDuplicates is the duplicate policy: whether a value of the named
	// producer read at several offsets is tolerated (RetryDuplicate) rather
	// than an anomaly (Duplicate). Nil means DefaultAllowDuplicates.
	AllowDuplicates func(producer string, idempotent bool) bool
}

// DefaultAllowDuplicates tolerates duplicates exactly from producers that
// are not idempotent: such a producer retries a produce whose answer it
// lost, and the retry may write the record a second time. An idempotent
// producer's retries carry the same producer id, epoch and sequence, which
// the broker must deduplicate.
func DefaultAllowDuplicates(producer string, idempotent bool) bool { return !idempotent }

func (o Options) withDefaults() Options {
	if o.MaxExamples == 0 {
		o.MaxExamples = DefaultMaxExamples
	}
	if o.AllowDuplicates == nil {
		o.AllowDuplicates = DefaultAllowDuplicates
	}
	return o
}

// Validate reports every problem with o (after defaults are applied).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.MaxExamples < 1 || o.MaxExamples > MaxExamplesLimit {
		errs = append(errs, fmt.Errorf("MaxExamples %d outside [1, %d]", o.MaxExamples, MaxExamplesLimit))
	}
	if err := o.Reader.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("checker: invalid options: %w", errors.Join(errs...))
	}
	return nil
}
