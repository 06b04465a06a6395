package catalog

import (
	"fmt"
	"slices"
	"time"
)

// legalTransitions is the ledger state machine. Same-state updates are legal
// while the ledger is unsealed (ensemble changes), for CLOSED (re-replication
// moves a replica to another bookie: checkReplicaMove) and for OFFLOADED
// (key compaction swaps the segment object: a new Location, nothing else);
// DELETED is terminal and is left only by DeleteLedgerMetadata.
var legalTransitions = map[LedgerState][]LedgerState{
	LedgerOpen:       {LedgerOpen, LedgerInRecovery, LedgerClosed},
	LedgerInRecovery: {LedgerInRecovery, LedgerClosed},
	LedgerClosed:     {LedgerClosed, LedgerOffloaded, LedgerDeleted},
	LedgerOffloaded:  {LedgerOffloaded, LedgerDeleted},
	LedgerDeleted:    nil,
}

// LegalTransition reports whether a ledger may go from one state to another.
func LegalTransition(from, to LedgerState) bool {
	return slices.Contains(legalTransitions[from], to)
}

// ValidateLedgerSpec checks CreateLedger's argument.
func ValidateLedgerSpec(s LedgerSpec) error {
	if err := ValidateTopicName(s.Topic); err != nil {
		return err
	}
	if err := ValidateID("topicID", string(s.TopicID)); err != nil {
		return err
	}
	if err := ValidatePartitionIndex(s.Partition); err != nil {
		return err
	}
	if err := s.Replication.validate("replication.ensemble", "replication.writeQuorum", "replication.ackQuorum"); err != nil {
		return err
	}
	if err := validateSegment(0, EnsembleSegment{Bookies: s.Ensemble}, s.Replication.Ensemble); err != nil {
		return err
	}
	if s.FirstOffset < 0 {
		return Invalid("firstOffset", "%d is negative", s.FirstOffset)
	}
	if err := ValidateID("writerOwner", s.WriterOwner); err != nil {
		return err
	}
	if s.WriterEpoch < 1 {
		return Invalid("writerEpoch", "%d: leases start at epoch 1", s.WriterEpoch)
	}
	return nil
}

// NewLedger is the record CreateLedger stores for spec under id at now.
func NewLedger(spec LedgerSpec, id LedgerID, now time.Time) LedgerMetadata {
	return LedgerMetadata{
		ID:          id,
		Topic:       spec.Topic,
		TopicID:     spec.TopicID,
		Partition:   spec.Partition,
		Replication: spec.Replication,
		Ensembles:   []EnsembleSegment{{FirstEntry: 0, Bookies: slices.Clone(spec.Ensemble)}},
		State:       LedgerOpen,
		LastEntry:   -1,
		FirstOffset: spec.FirstOffset,
		LastOffset:  spec.FirstOffset - 1,
		WriterOwner: spec.WriterOwner,
		WriterEpoch: spec.WriterEpoch,
		CreatedAt:   Timestamp(now),
		Version:     1,
	}
}

// NextLedger checks UpdateLedger's proposal against the stored record old
// and returns what to store: the proposal with Version+1 and the
// store-maintained timestamps. Errors: ErrVersionConflict, *ValidationError.
func NextLedger(old, proposed LedgerMetadata, now time.Time) (LedgerMetadata, error) {
	if proposed.Version != old.Version {
		return LedgerMetadata{}, fmt.Errorf("ledger %d is at version %d, not %d: %w", old.ID, old.Version, proposed.Version, ErrVersionConflict)
	}
	if err := checkImmutable(old, proposed); err != nil {
		return LedgerMetadata{}, err
	}
	if !LegalTransition(old.State, proposed.State) {
		return LedgerMetadata{}, Invalid("state", "ledger %d cannot go from %v to %v", old.ID, old.State, proposed.State)
	}
	if old.State.Sealed() {
		if !slices.EqualFunc(old.Ensembles, proposed.Ensembles, segmentEqual) {
			if old.State != LedgerClosed || proposed.State != LedgerClosed {
				return LedgerMetadata{}, Invalid("ensembles", "ledger %d is %v; its ensembles are final (only a CLOSED ledger's replicas move)", old.ID, old.State)
			}
			if err := checkReplicaMove(old, proposed); err != nil {
				return LedgerMetadata{}, err
			}
		}
		if proposed.LastEntry != old.LastEntry || proposed.LastOffset != old.LastOffset {
			return LedgerMetadata{}, Invalid("lastEntry", "ledger %d is %v; its last entry and offset are final", old.ID, old.State)
		}
	} else {
		if err := checkEnsembleChange(old, proposed); err != nil {
			return LedgerMetadata{}, err
		}
		if err := checkEnd(proposed); err != nil {
			return LedgerMetadata{}, err
		}
	}
	if err := checkLocation(old, proposed); err != nil {
		return LedgerMetadata{}, err
	}
	if err := checkDamaged(proposed); err != nil {
		return LedgerMetadata{}, err
	}
	next := proposed
	next.Ensembles = cloneSegments(proposed.Ensembles)
	next.Damaged = keptDamage(proposed)
	next.CreatedAt = old.CreatedAt
	next.ClosedAt = old.ClosedAt
	if proposed.State == LedgerClosed && old.State != LedgerClosed {
		next.ClosedAt = Timestamp(now)
	}
	next.Version = old.Version + 1
	return next, nil
}

// CheckDeletable checks DeleteLedgerMetadata against the stored record.
func CheckDeletable(m LedgerMetadata, expectVersion int64) error {
	if m.Version != expectVersion {
		return fmt.Errorf("ledger %d is at version %d, not %d: %w", m.ID, m.Version, expectVersion, ErrVersionConflict)
	}
	if m.State != LedgerDeleted {
		return Invalid("state", "ledger %d is %v; only a DELETED ledger's metadata can be removed", m.ID, m.State)
	}
	return nil
}

func checkImmutable(old, p LedgerMetadata) error {
	switch {
	case p.ID != old.ID:
		return Invalid("id", "is %d, stored ledger is %d", p.ID, old.ID)
	case p.Topic != old.Topic || p.TopicID != old.TopicID || p.Partition != old.Partition:
		return Invalid("topic", "ledger %d's topic and partition cannot change", old.ID)
	case p.Replication != old.Replication:
		return Invalid("replication", "ledger %d's replication cannot change", old.ID)
	case p.FirstOffset != old.FirstOffset:
		return Invalid("firstOffset", "ledger %d's first offset cannot change", old.ID)
	case p.WriterOwner != old.WriterOwner || p.WriterEpoch != old.WriterEpoch:
		return Invalid("writer", "ledger %d's writer cannot change", old.ID)
	case !p.State.Valid():
		return Invalid("state", "%v is not a ledger state", p.State)
	}
	return nil
}

// checkEnsembleChange allows what BookKeeper's ensemble change does: keep
// every segment but the last, optionally replace the last one in place
// (same FirstEntry: no entry was written to it yet), and append segments.
func checkEnsembleChange(old, p LedgerMetadata) error {
	n := len(p.Ensembles)
	if n == 0 || n > MaxEnsembleSegments {
		return Invalid("ensembles", "ledger %d has %d segments; want 1..%d", old.ID, n, MaxEnsembleSegments)
	}
	for i, seg := range p.Ensembles {
		if err := validateSegment(i, seg, old.Replication.Ensemble); err != nil {
			return err
		}
		if i == 0 && seg.FirstEntry != 0 {
			return Invalid("ensembles", "segment 0 starts at entry %d, not 0", seg.FirstEntry)
		}
		if i > 0 && seg.FirstEntry <= p.Ensembles[i-1].FirstEntry {
			return Invalid("ensembles", "segment %d starts at entry %d, not after segment %d's %d", i, seg.FirstEntry, i-1, p.Ensembles[i-1].FirstEntry)
		}
	}
	k := len(old.Ensembles)
	if n < k {
		return Invalid("ensembles", "ledger %d had %d segments, update has %d; segments are never removed", old.ID, k, n)
	}
	if !slices.EqualFunc(old.Ensembles[:k-1], p.Ensembles[:k-1], segmentEqual) {
		return Invalid("ensembles", "ledger %d: only the last segment may be replaced", old.ID)
	}
	if p.Ensembles[k-1].FirstEntry != old.Ensembles[k-1].FirstEntry {
		return Invalid("ensembles", "ledger %d: segment %d must keep first entry %d", old.ID, k-1, old.Ensembles[k-1].FirstEntry)
	}
	return nil
}

// checkReplicaMove allows what re-replication does to a CLOSED ledger:
// the same segments, each starting where it did, with some positions now
// naming bookies that were not in that segment (each segment still E
// distinct bookies). A position keeps its entries: a bookie already in the
// segment moving to another position would answer for entries it does not
// hold (with striping), so that is refused. The entries do not change,
// only where their copies live; the caller copies them to the new bookie
// (durably) before it stores the move.
func checkReplicaMove(old, p LedgerMetadata) error {
	if len(p.Ensembles) != len(old.Ensembles) {
		return Invalid("ensembles", "ledger %d is CLOSED: a replica move keeps its %d segments (update has %d)", old.ID, len(old.Ensembles), len(p.Ensembles))
	}
	for i, seg := range p.Ensembles {
		was := old.Ensembles[i]
		if seg.FirstEntry != was.FirstEntry {
			return Invalid("ensembles", "ledger %d is CLOSED: segment %d must keep first entry %d", old.ID, i, was.FirstEntry)
		}
		if err := validateSegment(i, seg, old.Replication.Ensemble); err != nil {
			return err
		}
		for j, b := range seg.Bookies {
			if b != was.Bookies[j] && slices.Contains(was.Bookies, b) {
				return Invalid("ensembles", "ledger %d is CLOSED: segment %d position %d moves to %q, which holds another position's entries", old.ID, i, j, b)
			}
		}
	}
	return nil
}

func validateSegment(i int, seg EnsembleSegment, e int) error {
	if len(seg.Bookies) != e {
		return Invalid("ensembles", "segment %d has %d bookies, want ensemble size %d", i, len(seg.Bookies), e)
	}
	if seg.FirstEntry < 0 {
		return Invalid("ensembles", "segment %d starts at negative entry %d", i, seg.FirstEntry)
	}
	for j, b := range seg.Bookies {
		if err := ValidateID("ensembles", b); err != nil {
			return err
		}
		if slices.Contains(seg.Bookies[:j], b) {
			return Invalid("ensembles", "segment %d lists bookie %q twice", i, b)
		}
	}
	return nil
}

func checkEnd(p LedgerMetadata) error {
	switch {
	case p.LastEntry < -1:
		return Invalid("lastEntry", "%d is below -1", p.LastEntry)
	case p.LastEntry == -1 && p.LastOffset != p.FirstOffset-1:
		return Invalid("lastOffset", "ledger %d has no entries, so last offset must be %d, not %d", p.ID, p.FirstOffset-1, p.LastOffset)
	case p.LastEntry >= 0 && p.LastOffset < p.FirstOffset:
		return Invalid("lastOffset", "ledger %d has entries, so last offset %d must be at least first offset %d", p.ID, p.LastOffset, p.FirstOffset)
	}
	return nil
}

// checkLocation: the object location is written exactly when the ledger
// becomes OFFLOADED, may be replaced while it stays OFFLOADED (a compacted
// segment swapped in), and is kept from then on.
func checkLocation(old, p LedgerMetadata) error {
	switch {
	case (old.State == LedgerClosed || old.State == LedgerOffloaded) && p.State == LedgerOffloaded:
		if p.Location == "" {
			return Invalid("location", "ledger %d: OFFLOADED needs the object location", old.ID)
		}
		if len(p.Location) > MaxObjectLocationLength {
			return Invalid("location", "is %d bytes, more than %d", len(p.Location), MaxObjectLocationLength)
		}
		return validatePrintable("location", p.Location)
	case p.Location != old.Location:
		return Invalid("location", "ledger %d: the location is set only on the move to OFFLOADED", old.ID)
	}
	return nil
}

// checkDamaged checks the proposal's damage marks: valid reasons and
// entries of the ledger, each bookie once, at most one per bookie the
// ledger could name. Marks on a ledger that is not CLOSED, or on a bookie
// its segments no longer name, are legal to propose: NextLedger drops them
// (keptDamage), so a replica move or an offload need not clear them.
func checkDamaged(p LedgerMetadata) error {
	if len(p.Damaged) > MaxEnsembleSize*MaxEnsembleSegments {
		return Invalid("damaged", "ledger %d has %d damage marks, more than %d", p.ID, len(p.Damaged), MaxEnsembleSize*MaxEnsembleSegments)
	}
	for i, d := range p.Damaged {
		if err := ValidateID("damaged", d.Bookie); err != nil {
			return err
		}
		switch {
		case !d.Reason.Valid():
			return Invalid("damaged", "mark %d: %q is not a damage reason (%s, %s)", i, d.Reason, DamageMissing, DamageChecksum)
		case d.Entry < 0 || (p.State == LedgerClosed && d.Entry > p.LastEntry):
			return Invalid("damaged", "mark %d: entry %d is outside ledger %d's entries 0..%d", i, d.Entry, p.ID, p.LastEntry)
		case d.At.IsZero():
			return Invalid("damaged", "mark %d: no report time", i)
		case slices.ContainsFunc(p.Damaged[:i], func(o DamagedCopy) bool { return o.Bookie == d.Bookie }):
			return Invalid("damaged", "ledger %d marks bookie %q twice", p.ID, d.Bookie)
		}
	}
	return nil
}

// keptDamage is the marks of p that apply: none unless CLOSED, and only
// those on bookies its segments name.
func keptDamage(p LedgerMetadata) []DamagedCopy {
	if p.State != LedgerClosed {
		return nil
	}
	var out []DamagedCopy
	for _, d := range p.Damaged {
		if slices.ContainsFunc(p.Ensembles, func(s EnsembleSegment) bool { return slices.Contains(s.Bookies, d.Bookie) }) {
			d.At = Timestamp(d.At)
			out = append(out, d)
		}
	}
	return out
}

func segmentEqual(a, b EnsembleSegment) bool {
	return a.FirstEntry == b.FirstEntry && slices.Equal(a.Bookies, b.Bookies)
}

func cloneSegments(s []EnsembleSegment) []EnsembleSegment {
	out := make([]EnsembleSegment, len(s))
	for i, seg := range s {
		out[i] = EnsembleSegment{FirstEntry: seg.FirstEntry, Bookies: slices.Clone(seg.Bookies)}
	}
	return out
}
