package compactor

import (
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Step names a point in a ledger's move to object storage, in order. The
// crash tests stop the compactor at each one (Hooks) and check that the
// next pass repairs everything.
type Step int

const (
	// StepBeforeUpload: nothing written yet.
	StepBeforeUpload Step = iota + 1
	// StepMidUpload: part of the segment was written to the object
	// writer; it is aborted, so no object appears (objstore's guarantee).
	StepMidUpload
	// StepAfterUpload: the object exists, not yet verified.
	StepAfterUpload
	// StepBeforeCAS: the object is verified and the pending marker written;
	// the catalog still says CLOSED. Also: a compacted rewrite is verified,
	// the catalog still points at the old segment.
	StepBeforeCAS
	// StepAfterCAS: the catalog says OFFLOADED; the bookies still hold
	// their copies.
	StepAfterCAS
	// StepBeforeBookieDelete: the grace is over; the bookies are asked next.
	StepBeforeBookieDelete
	// StepBeforeMetadataDelete: a DELETED ledger's data is gone; its
	// catalog record is removed next.
	StepBeforeMetadataDelete
)

var stepNames = map[Step]string{
	StepBeforeUpload: "before-upload", StepMidUpload: "mid-upload", StepAfterUpload: "after-upload",
	StepBeforeCAS: "before-cas", StepAfterCAS: "after-cas", StepBeforeBookieDelete: "before-bookie-delete",
	StepBeforeMetadataDelete: "before-metadata-delete",
}

func (s Step) String() string { return stepNames[s] }

// ParseStep reads a Step's String form.
func ParseStep(name string) (Step, error) {
	for s, n := range stepNames {
		if n == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("compactor: %q is not a step (before-upload, mid-upload, after-upload, before-cas, after-cas, before-bookie-delete, before-metadata-delete)", name)
}

// EnvExitAt names a step at which `sluice compactor` exits at once (exit
// status ExitAtStatus, no cleanup, like kill -9): the process-level crash
// tests set it. Never set it in production.
const (
	EnvExitAt    = "SLUICE_COMPACTOR_TEST_EXIT_AT"
	ExitAtStatus = 75
)

// Hooks are test seams. Production leaves them nil.
type Hooks struct {
	// Step is called as a ledger reaches each step; an error stops that
	// ledger's work there, as if the process had died (nothing after it
	// runs, nothing is undone), and the pass reports it.
	Step func(s Step, ledger catalog.LedgerID) error
}

func (h Hooks) at(s Step, id catalog.LedgerID) error {
	if h.Step == nil {
		return nil
	}
	return h.Step(s, id)
}
