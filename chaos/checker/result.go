package checker

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluicemq/sluice/chaos/history"
)

// Kind names a class of anomaly. The package doc defines each precisely.
type Kind string

// The anomaly kinds, in report order.
const (
	LostWrite          Kind = "lost-write"
	Duplicate          Kind = "duplicate"
	RetryDuplicate     Kind = "retry-duplicate"
	InconsistentOffset Kind = "inconsistent-offset"
	SequenceOrder      Kind = "sequence-order"
	FailedWriteRead    Kind = "failed-write-read"
	UnknownValue       Kind = "unknown-value"
	StaleCommit        Kind = "stale-commit"
	CommitBackwards    Kind = "commit-backwards"
	ConsumerSkip       Kind = "consumer-skip"
)

// Kinds lists every anomaly kind in report order.
func Kinds() []Kind {
	return []Kind{LostWrite, Duplicate, RetryDuplicate, InconsistentOffset, SequenceOrder,
		FailedWriteRead, UnknownValue, StaleCommit, CommitBackwards, ConsumerSkip}
}

// Tolerated reports whether anomalies of kind k are counted and shown but
// do not fail a check (Result.OK): only RetryDuplicate, a duplicate the
// duplicate policy allows.
func (k Kind) Tolerated() bool { return k == RetryDuplicate }

// meaning is the one-line gloss printed in the report.
func (k Kind) meaning() string {
	switch k {
	case LostWrite:
		return "acknowledged, drained past, never read"
	case Duplicate:
		return "one value read at two offsets"
	case RetryDuplicate:
		return "duplicate allowed by policy (non-idempotent retry)"
	case InconsistentOffset:
		return "an offset with two values, or a value not where acknowledged"
	case SequenceOrder:
		return "idempotent sequence and offset order disagree"
	case FailedWriteRead:
		return "a definitely failed produce was read"
	case UnknownValue:
		return "a value read that no produce wrote"
	case StaleCommit:
		return "commit accepted after a newer lease was granted"
	case CommitBackwards:
		return "committed offset moved backwards without a reset"
	case ConsumerSkip:
		return "a member skipped records within one lease"
	}
	return ""
}

// Anomaly is one violation found in a history.
type Anomaly struct {
	Kind Kind
	// Lines are the history lines of the ops involved, ascending (the
	// header is line 1). Anomalies of one kind are ordered by Lines.
	Lines []int
	// Description says what happened, naming values, partitions and
	// offsets.
	Description string
}

func (a Anomaly) String() string {
	var b strings.Builder
	b.WriteString("line")
	if len(a.Lines) > 1 {
		b.WriteString("s")
	}
	for i, l := range a.Lines {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(l))
	}
	b.WriteString(": ")
	b.WriteString(a.Description)
	return b.String()
}

// Result is what a check found.
type Result struct {
	Header history.Header
	// Ops counts the ops after the header.
	Ops int

	// Produce attempts by outcome. Acknowledged = AcknowledgedRead +
	// Anomalies[LostWrite] + Undrained.
	Produces         int
	Acknowledged     int
	AcknowledgedRead int
	// Undrained counts acknowledged produces that nobody read and that no
	// drain reached: their loss could not be checked. A scenario that
	// drains every partition after healing leaves none.
	Undrained           int
	Failed              int
	Indeterminate       int
	IndeterminateRead   int
	IndeterminateUnread int

	// Consumed counts consume ops; ValuesRead the distinct values read.
	Consumed   int
	ValuesRead int

	Commits              int
	CommitsAccepted      int
	CommitsRejected      int
	CommitsIndeterminate int
	Leases               int
	Resets               int
	// DrainedPartitions counts partitions with a drain op.
	DrainedPartitions int
	// Faults counts fault ops (faults the harness injected or healed).
	Faults int

	// Anomalies counts every anomaly found, per kind (kinds with none are
	// absent).
	Anomalies map[Kind]int
	// Examples holds the first Options.MaxExamples anomalies of each kind,
	// ordered by their lines.
	Examples map[Kind][]Anomaly
}

// OK reports whether the history has no anomaly of a kind that is not
// Tolerated.
func (r *Result) OK() bool { return r.Failures() == 0 }

// Failures counts the anomalies of kinds that are not Tolerated.
func (r *Result) Failures() int {
	n := 0
	for k, c := range r.Anomalies {
		if !k.Tolerated() {
			n += c
		}
	}
	return n
}

// Report writes a readable summary: the counts, a table of anomalies per
// kind, the verdict, and the first anomalies of each kind.
func (r *Result) Report(w io.Writer) error {
	ew := &errWriter{w: w}
	h := r.Header
	ew.printf("history: %d ops", r.Ops)
	if h.Scenario != "" {
		ew.printf(", scenario %q", h.Scenario)
	}
	ew.printf(", seed %d, started %s\n", h.Seed, h.Start.Format("2006-01-02T15:04:05Z07:00"))
	ew.printf("produce  %d: acknowledged %d (read %d, lost %d, not drained %d), failed %d (read %d), indeterminate %d (read %d, never read %d)\n",
		r.Produces, r.Acknowledged, r.AcknowledgedRead, r.Anomalies[LostWrite], r.Undrained,
		r.Failed, r.Anomalies[FailedWriteRead], r.Indeterminate, r.IndeterminateRead, r.IndeterminateUnread)
	ew.printf("consume  %d records, %d distinct values\n", r.Consumed, r.ValuesRead)
	ew.printf("commit   %d: accepted %d, rejected %d, indeterminate %d\n", r.Commits, r.CommitsAccepted, r.CommitsRejected, r.CommitsIndeterminate)
	ew.printf("leases %d, resets %d, drained partitions %d, faults %d\n\n", r.Leases, r.Resets, r.DrainedPartitions, r.Faults)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "check\tanomalies\tmeaning\n")
	for _, k := range Kinds() {
		note := k.meaning()
		if k.Tolerated() {
			note += " [tolerated]"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k, r.Anomalies[k], note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.OK() {
		ew.printf("\nresult: OK\n")
	} else {
		ew.printf("\nresult: FAIL (%d anomalies)\n", r.Failures())
	}
	switch {
	case r.Acknowledged > 0 && r.DrainedPartitions == 0:
		ew.printf("warning: no drain ops: lost writes cannot be detected\n")
	case r.Undrained > 0:
		ew.printf("warning: %d acknowledged writes were never read and no drain reached them: their loss is unchecked\n", r.Undrained)
	}
	for _, k := range Kinds() {
		ex := r.Examples[k]
		if len(ex) == 0 {
			continue
		}
		ew.printf("\n%s: first %d of %d\n", k, len(ex), r.Anomalies[k])
		for _, a := range ex {
			ew.printf("  %s\n", a)
		}
	}
	return ew.err
}

// errWriter keeps the first write error so Report can print without
// checking every call.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// collector counts anomalies and keeps the first max of each kind by
// lines. Anomalies are found partition by partition, not in line order, so
// it keeps a small sorted list per kind.
type collector struct {
	max    int
	counts map[Kind]int
	kept   map[Kind][]Anomaly
}

func newCollector(max int) *collector {
	return &collector{max: max, counts: map[Kind]int{}, kept: map[Kind][]Anomaly{}}
}

// add counts an anomaly and keeps it if it is among the first; describe
// runs only then.
func (c *collector) add(k Kind, lines []int, describe func() string) {
	c.counts[k]++
	slices.Sort(lines)
	lines = slices.Compact(lines)
	kept := c.kept[k]
	if len(kept) == c.max && slices.Compare(lines, kept[len(kept)-1].Lines) > 0 {
		return
	}
	a := Anomaly{Kind: k, Lines: lines, Description: describe()}
	if len(kept) == c.max && compareAnomalies(a, kept[len(kept)-1]) >= 0 {
		return // equal lines: the description decides, so the result does not depend on discovery order
	}
	i, _ := slices.BinarySearchFunc(kept, a, compareAnomalies)
	kept = slices.Insert(kept, i, a)
	if len(kept) > c.max {
		kept = kept[:c.max]
	}
	c.kept[k] = kept
}

func compareAnomalies(a, b Anomaly) int {
	if c := slices.Compare(a.Lines, b.Lines); c != 0 {
		return c
	}
	return strings.Compare(a.Description, b.Description)
}
