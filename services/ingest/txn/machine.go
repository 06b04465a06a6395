package txn

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the coordinator; the RPC edge maps them to codes.
var (
	// ErrFenced: the request's epoch is older than the transactional id's
	// (a newer InitProducer, a timeout's abort or a finished transaction
	// bumped it). The producer is a zombie: it must stop.
	ErrFenced = errors.New("txn: producer fenced: a newer epoch of this transactional id exists")
	// ErrUnknownProducer: the request's producer id is not the one the
	// transactional id holds (or the id was never initialised).
	ErrUnknownProducer = errors.New("txn: producer id does not belong to this transactional id")
	// ErrConcurrent: the previous transaction is still ending (markers
	// being written). Retriable.
	ErrConcurrent = errors.New("txn: the previous transaction is still completing; retry")
	// ErrInvalidState: the request does not fit the transaction's state
	// (EndTxn with no open transaction, or the opposite outcome of one
	// already decided).
	ErrInvalidState = errors.New("txn: invalid transaction state")
	// ErrTimedOut: the producer's transaction was aborted past its
	// deadline, which bumped the epoch. Unlike ErrFenced, no other session
	// took over: InitProducer with the session's ids resumes it (KIP-588).
	ErrTimedOut = errors.New("txn: the transaction timed out and was aborted; InitProducer with this session's ids to resume")
)

// Event is a request to the coordinator, or the driver's report of a step
// it carried out. Now is the driver's clock reading.
type Event interface{ isEvent() }

// InitProducer starts (or restarts) the producer session of the
// transactional id: fresh id or bumped epoch; an open transaction is
// aborted first. FreshID is a producer id the driver allocated because the
// previous Decision asked for one (NeedProducerID); 0 otherwise. Resume,
// when set, is the session the caller holds (KIP-588): it is restarted
// only if it is the current one or the one a timeout's abort bumped, and
// fenced otherwise — a producer re-initialising after a timeout cannot
// fence a newer instance.
type InitProducer struct {
	Timeout time.Duration
	FreshID int64
	Resume  *Reply
	Now     time.Time
}

// AddPartitions adds partitions to the producer's transaction, opening it
// if none is open.
type AddPartitions struct {
	ProducerID int64
	Epoch      int16
	Partitions []Partition
	Now        time.Time
}

// AddGroup adds a consumer group whose offsets the transaction commits.
type AddGroup struct {
	ProducerID int64
	Epoch      int16
	Group      string
	Now        time.Time
}

// AddOffsets adds consumer offsets the transaction commits (applied when
// it commits, dropped when it aborts), and their groups; it opens a
// transaction if none is open. The lease epochs the offsets were read
// under are the driver's to check before.
type AddOffsets struct {
	ProducerID int64
	Epoch      int16
	Offsets    []Offset
	Now        time.Time
}

// EndTxn commits or aborts the producer's transaction. FreshID is a
// producer id the driver allocated because the previous Decision asked for
// one (NeedProducerID: the bump would spend the epoch space); 0 otherwise.
// Next, when set, are the partitions the producer's next transaction opens
// with (State.Next).
type EndTxn struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	FreshID    int64
	Next       []Partition
	Now        time.Time
}

// Expire aborts the transaction if it is Ongoing past its deadline (the
// sweeper's event), and finishes one left Preparing by a coordinator that
// died (writes its markers again).
type Expire struct{ Now time.Time }

// MarkersWritten: the driver wrote every marker of the Prepare state it
// stored (a marker written twice is harmless: the partition writer ignores
// a marker for a transaction it has no open batches of).
type MarkersWritten struct{}

func (InitProducer) isEvent()   {}
func (AddPartitions) isEvent()  {}
func (AddGroup) isEvent()       {}
func (AddOffsets) isEvent()     {}
func (EndTxn) isEvent()         {}
func (Expire) isEvent()         {}
func (MarkersWritten) isEvent() {}

// Markers asks the driver to write a commit or abort marker of
// (ProducerID, Epoch) into every partition and, when Commit, to apply
// Offsets (an abort drops them).
type Markers struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	Partitions []Partition
	Groups     []string
	Offsets    []Offset
}

// Decision is what Step decided. The driver carries it out in this order:
// allocate an id and step again (NeedProducerID); store Store with
// compare-and-set on the current state's Version (on a lost race, load the
// state again and step again); write Markers and step MarkersWritten on
// the stored state; answer Err if set, else Reply. A Decision can carry
// both work and an error: an InitProducer that finds a transaction open
// stores its abort and writes its markers, and answers ErrConcurrent.
type Decision struct {
	NeedProducerID bool
	Store          *State
	Markers        *Markers
	// Reply is the producer id and epoch the client continues with (the
	// epoch is bumped by InitProducer and by every EndTxn, KIP-890).
	Reply Reply
	// Err is the client's error.
	Err error
	// Pending: the reply waits until the markers are written (EndTxn and
	// an InitProducer that had to abort answer once the transaction is
	// complete).
	Pending bool
	// Next: an EndTxn's answer, the partitions the producer's next
	// transaction is open with (State.Next, as stored — a retry's own
	// are not what counts): it may write there without adding them.
	Next []Partition
}

// Reply is the session a client continues with.
type Reply struct {
	ProducerID int64
	Epoch      int16
}

// MaxEpoch is the largest producer epoch (Kafka's record batch field). A
// client's session never reaches it: the bump to it is a fresh producer id
// (InitProducer, EndTxn), so the markers that end a session's transactions
// always have a greater epoch than its data. Only a coordinator's abort
// writes markers at MaxEpoch, and the next InitProducer then takes a fresh
// id.
const MaxEpoch = 1<<15 - 1

// spent reports an epoch whose bump would reach MaxEpoch.
func spent(epoch int16) bool { return epoch >= MaxEpoch-1 }

// WithFreshID returns ev with the producer id the driver allocated for a
// Decision that asked for one (NeedProducerID: only InitProducer and
// EndTxn do).
func WithFreshID(ev Event, id int64) Event {
	switch e := ev.(type) {
	case InitProducer:
		e.FreshID = id
		return e
	case EndTxn:
		e.FreshID = id
		return e
	}
	panic(fmt.Sprintf("txn: %T takes no producer id", ev))
}

// Step decides what ev does to the transactional id whose current state is
// cur (nil when it was never initialised). It is a pure function of its
// arguments.
func Step(id string, cur *State, ev Event) Decision {
	switch e := ev.(type) {
	case InitProducer:
		return initProducer(id, cur, e)
	case AddPartitions:
		return add(cur, e.ProducerID, e.Epoch, e.Now, func(s *State) bool { return s.addPartitions(e.Partitions) })
	case AddGroup:
		return add(cur, e.ProducerID, e.Epoch, e.Now, func(s *State) bool { return s.addGroup(e.Group) })
	case AddOffsets:
		return add(cur, e.ProducerID, e.Epoch, e.Now, func(s *State) bool { return s.addOffsets(e.Offsets) })
	case EndTxn:
		return endTxn(cur, e)
	case Expire:
		return expire(cur, e.Now)
	case MarkersWritten:
		return markersWritten(cur)
	}
	panic(fmt.Sprintf("txn: unknown event %T", ev))
}

func initProducer(id string, cur *State, e InitProducer) Decision {
	if e.Resume != nil {
		if err := resumable(cur, *e.Resume); err != nil {
			return Decision{Err: err}
		}
	}
	switch {
	case cur == nil || spent(cur.Epoch) && cur.Status.idle():
		// First use, or the epoch space is spent: a new id at epoch 0.
		if e.FreshID == 0 {
			return Decision{NeedProducerID: true}
		}
		next := State{ID: id, ProducerID: e.FreshID, Status: Empty, Timeout: e.Timeout}
		// (TimedOut, Next and Ended start empty: a new session.)
		if cur != nil {
			next.Version = cur.Version
		}
		return Decision{Store: &next, Reply: Reply{next.ProducerID, 0}}
	case cur.Status.idle():
		next := cur.clone()
		next.Epoch++
		next.Status, next.Timeout, next.BumpedByCoordinator, next.PrevProducerID = Empty, e.Timeout, true, 0
		next.Partitions, next.Groups, next.Offsets, next.Ended, next.TimedOut = nil, nil, nil, 0, false
		return Decision{Store: &next, Reply: Reply{next.ProducerID, next.Epoch}}
	case cur.Status == Ongoing && sabotageInitFence && !spent(cur.Epoch):
		// Chaos sabotage build only: the new session inherits the open
		// transaction instead of ending it.
		next := cur.clone()
		next.Epoch++
		next.Timeout, next.PrevProducerID = e.Timeout, 0
		return Decision{Store: &next, Reply: Reply{next.ProducerID, next.Epoch}}
	case cur.Status == Ongoing:
		// Abort the open transaction at a bumped epoch (fencing its
		// producer); the client retries InitProducer once it is complete.
		d := abortAt(cur, false)
		d.Err = fmt.Errorf("%w: an open transaction of %q is being aborted", ErrConcurrent, id)
		return d
	default:
		// Preparing: finish writing the markers first (the sweeper or the
		// coordinator that decided does); retry.
		return Decision{Err: fmt.Errorf("%w: %q is %v", ErrConcurrent, id, cur.Status)}
	}
}

// resumable verifies that the session s may be restarted: it is cur's
// current one, or the one before a timeout's abort.
func resumable(cur *State, s Reply) error {
	switch {
	case cur != nil && s.ProducerID == cur.ProducerID && s.Epoch == cur.Epoch:
		return nil
	case cur != nil && s.ProducerID == cur.ProducerID && cur.TimedOut && s.Epoch == cur.Epoch-1:
		return nil
	case cur != nil && (s.ProducerID == cur.ProducerID || s.ProducerID == cur.PrevProducerID):
		return fmt.Errorf("%w: session epoch %d, current %d", ErrFenced, s.Epoch, cur.Epoch)
	}
	return ErrUnknownProducer
}

// check verifies that the request's producer session is the current one.
func check(cur *State, pid int64, epoch int16) error {
	switch {
	case cur != nil && cur.PrevProducerID != 0 && pid == cur.PrevProducerID:
		return fmt.Errorf("%w: producer id %d spent its epochs and was replaced by %d", ErrFenced, pid, cur.ProducerID)
	case cur == nil || pid != cur.ProducerID:
		return ErrUnknownProducer
	case epoch == MaxEpoch:
		// Only a binary before the fix of the epoch overflow gave a
		// session the last epoch; markers could not end its data.
		return fmt.Errorf("%w: epoch %d is past a session's last; InitProducer again for a new producer id", ErrFenced, epoch)
	case cur.TimedOut && epoch == cur.Epoch-1:
		return fmt.Errorf("%w (epoch %d, now %d)", ErrTimedOut, epoch, cur.Epoch)
	case epoch < cur.Epoch:
		return fmt.Errorf("%w: epoch %d, current %d", ErrFenced, epoch, cur.Epoch)
	case epoch > cur.Epoch:
		// A client cannot hold an epoch the coordinator never gave out.
		return fmt.Errorf("%w: epoch %d is newer than %d", ErrUnknownProducer, epoch, cur.Epoch)
	}
	return nil
}

func add(cur *State, pid int64, epoch int16, now time.Time, apply func(*State) bool) Decision {
	if err := check(cur, pid, epoch); err != nil {
		return Decision{Err: err}
	}
	reply := Reply{cur.ProducerID, cur.Epoch}
	switch {
	case cur.Status.preparing():
		return Decision{Err: fmt.Errorf("%w: %q is %v", ErrConcurrent, cur.ID, cur.Status)}
	case cur.Status.idle():
		next := cur.clone()
		next.Status, next.Deadline = Ongoing, now.Add(cur.Timeout)
		next.Partitions, next.Groups, next.Offsets = nil, nil, nil
		apply(&next)
		return Decision{Store: &next, Reply: reply}
	}
	next := cur.clone()
	if !apply(&next) {
		return Decision{Reply: reply} // already in: nothing to store
	}
	if cur.Ended != 0 {
		// Opened by the last EndTxn (Next): the client's transaction
		// shows itself now, and its timeout counts from here. (A retry of
		// that EndTxn is no longer answered: the client moved on.)
		next.Deadline, next.Ended = now.Add(cur.Timeout), 0
	}
	return Decision{Store: &next, Reply: reply}
}

func endTxn(cur *State, e EndTxn) Decision {
	want, other := PrepareAbort, CompleteAbort
	if e.Commit {
		want, other = PrepareCommit, CompleteCommit
	}
	// A retry of an EndTxn already decided comes with the epoch before the
	// bump (KIP-890), or the replaced producer id's last one: answer it
	// with the outcome, or refuse the opposite.
	if cur != nil && retriedEnd(cur, e) {
		if cur.Status == want || cur.Status == other || cur.Status == Ongoing && cur.Ended == other {
			d := Decision{Reply: Reply{cur.ProducerID, cur.Epoch}}
			switch {
			case cur.Status.preparing():
				d.Pending = true
				d.Markers = markersOf(cur)
				d.Next = cur.Next
			case cur.Status == Ongoing:
				d.Next = cur.Partitions // opened by it, and nothing added since
			}
			return d
		}
		was := cur.Status
		if cur.Ended != 0 {
			was = cur.Ended
		}
		return Decision{Err: fmt.Errorf("%w: the transaction was already %v", ErrInvalidState, was)}
	}
	if err := check(cur, e.ProducerID, e.Epoch); err != nil {
		return Decision{Err: err}
	}
	switch cur.Status {
	case Ongoing, Empty, CompleteCommit, CompleteAbort:
		if spent(cur.Epoch) && e.FreshID == 0 {
			return Decision{NeedProducerID: true}
		}
		next := cur.clone()
		next.Deadline, next.BumpedByCoordinator, next.TimedOut, next.Ended = time.Time{}, false, false, 0
		switch {
		case spent(cur.Epoch):
			// The bump would reach MaxEpoch: the producer continues under
			// a fresh id; this transaction's markers are the old id's, at
			// MaxEpoch (markersOf).
			next.PrevProducerID, next.ProducerID, next.Epoch = cur.ProducerID, e.FreshID, 0
		case !sabotageTxnBump || cur.Status != Ongoing: // chaos sabotage build only: no per-transaction bump
			next.Epoch++
			next.PrevProducerID = 0
		}
		reply := Reply{next.ProducerID, next.Epoch}
		nextParts := sortedPartitions(e.Next)
		if cur.Status != Ongoing {
			// Nothing was added: there is nothing to commit or abort. The
			// epoch is bumped all the same, so every EndTxn ends an epoch.
			next.Status = other
			if nextParts != nil {
				// No markers to wait for: the next transaction opens now.
				next.Status, next.Ended, next.Partitions, next.Deadline = Ongoing, other, nextParts, e.Now.Add(cur.Timeout)
				next.Groups, next.Offsets = nil, nil
			}
			return Decision{Store: &next, Reply: reply, Next: nextParts}
		}
		next.Status = want
		if nextParts != nil {
			next.Next, next.Deadline = nextParts, e.Now.Add(cur.Timeout)
		}
		return Decision{Store: &next, Markers: markersOf(&next), Reply: reply, Pending: true, Next: nextParts}
	}
	return Decision{Err: fmt.Errorf("%w: %q is %v", ErrConcurrent, cur.ID, cur.Status)}
}

// Decided reports whether e is a retry of the EndTxn that decided cur's
// current or last transaction, asking for the outcome it got: Step answers
// it with that outcome and decides nothing (the driver asks when a
// CommitTxn's batches failed: a retry's are fenced by its own decision).
func Decided(cur *State, e EndTxn) bool {
	if cur == nil || !retriedEnd(cur, e) {
		return false
	}
	if e.Commit {
		return cur.Status == PrepareCommit || cur.Status == CompleteCommit || cur.Ended == CompleteCommit
	}
	return cur.Status == PrepareAbort || cur.Status == CompleteAbort || cur.Ended == CompleteAbort
}

// retriedEnd reports whether e is a retry of the EndTxn that cur's
// current or last transaction ended with.
func retriedEnd(cur *State, e EndTxn) bool {
	if cur.BumpedByCoordinator || !(cur.Status.preparing() || cur.Status == CompleteCommit || cur.Status == CompleteAbort || cur.Ended != 0) {
		return false
	}
	if cur.PrevProducerID != 0 {
		return e.ProducerID == cur.PrevProducerID && spent(e.Epoch)
	}
	return e.ProducerID == cur.ProducerID && e.Epoch == cur.Epoch-1
}

// abortAt decides to abort cur's open transaction at a bumped epoch (at
// most MaxEpoch: a session's epoch is below it, so the abort markers still
// fence its data; the next InitProducer takes a fresh id). timedOut: the
// abort is the timeout's, so the session is resumable (State.TimedOut).
func abortAt(cur *State, timedOut bool) Decision {
	next := cur.clone()
	if next.Epoch < MaxEpoch {
		next.Epoch++
	}
	next.PrevProducerID, next.Ended, next.TimedOut = 0, 0, timedOut
	next.Status, next.Deadline, next.BumpedByCoordinator = PrepareAbort, time.Time{}, true
	return Decision{Store: &next, Markers: markersOf(&next), Reply: Reply{next.ProducerID, next.Epoch}, Pending: true}
}

func expire(cur *State, now time.Time) Decision {
	switch {
	case cur == nil:
		return Decision{}
	case cur.Status == Ongoing && !now.Before(cur.Deadline):
		return abortAt(cur, true)
	case cur.Status.preparing():
		// Left by a coordinator that died after deciding: write the
		// markers again.
		return Decision{Markers: markersOf(cur), Pending: true}
	}
	return Decision{}
}

func markersWritten(cur *State) Decision {
	if cur == nil || !cur.Status.preparing() {
		return Decision{} // finished meanwhile
	}
	next := cur.clone()
	next.Status = CompleteCommit
	if cur.Status == PrepareAbort {
		next.Status = CompleteAbort
	}
	next.Partitions, next.Groups, next.Offsets = nil, nil, nil
	if len(cur.Next) > 0 {
		// The next transaction opens with the partitions its EndTxn
		// named, and the deadline it set.
		next.Ended, next.Status, next.Partitions, next.Next = next.Status, Ongoing, cur.Next, nil
	}
	return Decision{Store: &next, Reply: Reply{next.ProducerID, next.Epoch}}
}

// markersOf is what a Prepare state s asks to be written: markers at its
// producer id and epoch, or at the replaced id's MaxEpoch when its EndTxn
// spent the epoch space.
func markersOf(s *State) *Markers {
	pid, epoch := s.ProducerID, s.Epoch
	if s.PrevProducerID != 0 {
		pid, epoch = s.PrevProducerID, MaxEpoch
	}
	m := &Markers{ProducerID: pid, Epoch: epoch, Commit: s.Status == PrepareCommit,
		Partitions: s.Partitions, Groups: s.Groups}
	if m.Commit {
		m.Offsets = s.Offsets
	}
	return m
}
