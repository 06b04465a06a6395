package txn

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is where a transactional id's current transaction is.
type Status uint8

const (
	// Empty: the producer is initialised and no transaction is open.
	Empty Status = iota + 1
	// Ongoing: a transaction is open; partitions and groups join it.
	Ongoing
	// PrepareCommit, PrepareAbort: the outcome is decided and stored;
	// markers are being written. The decision never changes.
	PrepareCommit
	PrepareAbort
	// CompleteCommit, CompleteAbort: every marker is written; the next
	// transaction may begin.
	CompleteCommit
	CompleteAbort
)

func (s Status) String() string {
	switch s {
	case Empty:
		return "empty"
	case Ongoing:
		return "ongoing"
	case PrepareCommit:
		return "prepare-commit"
	case PrepareAbort:
		return "prepare-abort"
	case CompleteCommit:
		return "complete-commit"
	case CompleteAbort:
		return "complete-abort"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// preparing reports a decided outcome whose markers are not all written.
func (s Status) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// idle reports a state in which no transaction is open or ending.
func (s Status) idle() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// Partition is a partition of a topic incarnation a transaction wrote to.
type Partition struct {
	TopicID   string
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%s/%d", p.TopicID, p.Partition) }

// Offset is a consumer offset the transaction commits (KIP-447's
// TxnOffsetCommit): the next offset to consume of a partition of a topic
// incarnation, for a group.
type Offset struct {
	Group, Topic, TopicID string
	Partition             int32
	Offset                int64
}

// State is the coordinator's record of one transactional id, stored in
// bookkeeping and changed only by compare-and-set on Version.
//
// Invariants (checked by the transcripts' harness after every step):
//   - Epoch never decreases while ProducerID stays; ProducerID changes only
//     when the epoch space is spent, and then Epoch restarts at 0.
//   - Partitions, Groups and Offsets are empty when idle; Partitions and
//     Groups sorted and distinct otherwise, Offsets distinct by (group,
//     topic, partition), each of a group in Groups.
//   - Deadline is set (non-zero) exactly while Ongoing, or while
//     preparing with Next (then it is the next transaction's).
//   - Next is set only while preparing; sorted and distinct. Ended is
//     set (CompleteCommit or CompleteAbort) only while Ongoing.
//   - TimedOut only with BumpedByCoordinator, and never while Ongoing or
//     preparing a commit.
//   - Epoch never exceeds MaxEpoch-1 in a session given to a client
//     (InitProducer and EndTxn move to a fresh producer id instead, so a
//     marker always has a greater epoch than the data it ends); only a
//     coordinator's abort can store MaxEpoch.
//   - PrevProducerID is set only at Epoch 0, by an EndTxn that spent the
//     epoch space, and only while no epoch bump followed.
type State struct {
	ID         string // the transactional id
	ProducerID int64
	Epoch      int16
	Status     Status
	// Timeout is the producer's transaction timeout: an Ongoing
	// transaction older than it is aborted.
	Timeout time.Duration
	// Deadline is when the Ongoing transaction times out.
	Deadline time.Time
	// Partitions and Groups joined the current transaction; Offsets are
	// the consumer offsets it commits (one per group, topic and
	// partition: the latest sent).
	Partitions []Partition
	Groups     []string
	Offsets    []Offset
	// BumpedByCoordinator: the last epoch bump was the coordinator's (an
	// InitProducer, or a timeout's abort), not the client's EndTxn. An
	// EndTxn at the epoch before is then a fenced producer's, not a retry.
	BumpedByCoordinator bool
	// Next are the partitions the producer's next transaction opens with,
	// named by the EndTxn that decided this Prepare (where the client
	// expects to write next): the Prepare's Complete is that transaction,
	// Ongoing with them, so that its first writes need no AddPartitions —
	// one compare-and-set per transaction instead of two. Only while
	// preparing.
	Next []Partition
	// Ended is the outcome (CompleteCommit or CompleteAbort) of the
	// transaction whose EndTxn opened the Ongoing one with Next: a retry of
	// that EndTxn is answered with it. 0 otherwise.
	Ended Status
	// TimedOut: the last bump was the abort of a transaction past its
	// deadline, and no session began since. The session before it is then
	// timed out, not fenced: its requests get ErrTimedOut, and its
	// InitProducer (with its ids) resumes it (KIP-588).
	TimedOut bool
	// PrevProducerID is the producer id an EndTxn replaced because its
	// epochs were spent (KIP-890: the bump past MaxEpoch-1 is a fresh id at
	// epoch 0). That transaction's markers are at (PrevProducerID,
	// MaxEpoch), a retry of its EndTxn comes with (PrevProducerID,
	// MaxEpoch-1), and any other request of PrevProducerID is fenced. 0
	// when the current id was not given by an EndTxn.
	PrevProducerID int64
	// Version is the store's compare-and-set token (0: not stored yet).
	Version int64
}

func (s State) String() string {
	parts := make([]string, len(s.Partitions))
	for i, p := range s.Partitions {
		parts[i] = p.String()
	}
	d := "-"
	if !s.Deadline.IsZero() {
		d = s.Deadline.UTC().Format("15:04:05.000")
	}
	offs := ""
	if len(s.Offsets) > 0 {
		os := make([]string, len(s.Offsets))
		for i, o := range s.Offsets {
			os[i] = fmt.Sprintf("%s:%s/%d@%d", o.Group, o.Topic, o.Partition, o.Offset)
		}
		offs = " offsets=[" + strings.Join(os, " ") + "]"
	}
	prev := ""
	if s.PrevProducerID != 0 {
		prev = fmt.Sprintf(" prev-pid=%d", s.PrevProducerID)
	}
	if len(s.Next) > 0 {
		ns := make([]string, len(s.Next))
		for i, p := range s.Next {
			ns[i] = p.String()
		}
		prev += " next=[" + strings.Join(ns, " ") + "]"
	}
	if s.Ended != 0 {
		prev += " ended=" + s.Ended.String()
	}
	if s.TimedOut {
		prev += " timed-out"
	}
	return fmt.Sprintf("%s pid=%d epoch=%d %v deadline=%s partitions=[%s] groups=[%s]%s%s v%d",
		s.ID, s.ProducerID, s.Epoch, s.Status, d, strings.Join(parts, " "), strings.Join(s.Groups, " "), offs, prev, s.Version)
}

// clone returns s with its own slices.
func (s State) clone() State {
	s.Partitions = slices.Clone(s.Partitions)
	s.Next = slices.Clone(s.Next)
	s.Groups = slices.Clone(s.Groups)
	s.Offsets = slices.Clone(s.Offsets)
	return s
}

// sortedPartitions returns ps sorted and distinct (a new slice; nil for
// none).
func sortedPartitions(ps []Partition) []Partition {
	if len(ps) == 0 {
		return nil
	}
	out := slices.Clone(ps)
	slices.SortFunc(out, comparePartitions)
	return slices.CompactFunc(out, func(a, b Partition) bool { return a == b })
}

// addPartitions adds ps to s, keeping the list sorted and distinct, and
// reports whether any was new.
func (s *State) addPartitions(ps []Partition) bool {
	added := false
	for _, p := range ps {
		i, found := slices.BinarySearchFunc(s.Partitions, p, comparePartitions)
		if !found {
			s.Partitions = slices.Insert(s.Partitions, i, p)
			added = true
		}
	}
	return added
}

// HasPartition reports whether p joined the current transaction.
func (s State) HasPartition(p Partition) bool {
	_, found := slices.BinarySearchFunc(s.Partitions, p, comparePartitions)
	return found
}

func comparePartitions(a, b Partition) int {
	if c := strings.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// addOffsets adds os to s's offsets, replacing an earlier offset of the
// same group, topic and partition, and their group to s's groups; false
// when nothing changed.
func (s *State) addOffsets(os []Offset) bool {
	changed := false
	for _, o := range os {
		if s.addGroup(o.Group) {
			changed = true
		}
		i := slices.IndexFunc(s.Offsets, func(x Offset) bool {
			return x.Group == o.Group && x.Topic == o.Topic && x.Partition == o.Partition
		})
		switch {
		case i < 0:
			s.Offsets = append(s.Offsets, o)
			changed = true
		case s.Offsets[i] != o:
			s.Offsets[i] = o
			changed = true
		}
	}
	return changed
}

// addGroup adds g to s's groups, sorted and distinct; false when present.
func (s *State) addGroup(g string) bool {
	i, found := slices.BinarySearch(s.Groups, g)
	if found {
		return false
	}
	s.Groups = slices.Insert(s.Groups, i, g)
	return true
}
