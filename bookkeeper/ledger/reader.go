package ledger

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Reader holds the read rules of one ledger (BookKeeper's ReadOnlyLedgerHandle
// with its PendingReadOps and speculative reads):
//
//   - on an open ledger (OPEN or IN_RECOVERY) an entry is readable only up to
//     the LAC the reader learned from bookies — never beyond, since an entry
//     past the LAC may not be acknowledged and recovery may drop it;
//   - on a closed ledger, only up to its last entry — never beyond, since
//     bookies may hold entries past the end that recovery did not keep;
//   - an entry is read from one replica of its write set (in the segment
//     that holds it; Schedule.ReadOrder: when every bookie holds every
//     entry, runs of ReadRun entries ask the same bookie first, so a
//     client can read them with one range read), the next replica is tried when that one fails or says
//     "no such entry", and a SpeculativeTimeout event adds one more replica
//     while the first is still outstanding; the first answer wins.
//
// Events: Read, ReadOK, ReadNoEntry, ReadFailed, SpeculativeTimeout,
// LacLearned, MetadataChanged. Actions: SendRead, Deliver, ReadError.
type Reader struct {
	cfg   Config
	sched Schedule

	// segments are the ledger's ensembles as the reader last read them.
	segments []catalog.EnsembleSegment
	// closed and lastEntry: the ledger is sealed at lastEntry. Invariant:
	// once closed, never reopened, and lastEntry never changes.
	closed    bool
	lastEntry int64
	// lac is the highest LAC learned (-1 if none). Invariant: only grows;
	// on an open ledger Read refuses entries beyond it, so the reader never
	// returns an entry that is not acknowledged.
	lac int64

	// reads are the reads in progress by entry. Invariant:
	// len(reads) <= MaxOutstandingReads; every entry in it was readable
	// when asked (and stays so: bounds only grow).
	reads map[int64]*readOp

	out []Action
}

type readOp struct {
	bookies     []string // the write set's bookies, in write-set order
	next        int      // index in bookies of the next replica to ask
	answered    idxSet   // indexes in bookies that answered
	outstanding int      // replicas asked and not answered
}

// NewReader returns a reader of the ledger described by m (as read from the
// catalog). cfg must be valid and match m.Replication.
func NewReader(cfg Config, m catalog.LedgerMetadata) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if len(m.Ensembles) == 0 {
		return nil, fmt.Errorf("%w: ledger %d has no ensembles", ErrInvalidEvent, m.ID)
	}
	sched, _ := NewSchedule(cfg.Replication)
	return &Reader{
		cfg:       cfg,
		sched:     sched,
		segments:  cloneSegments(m.Ensembles),
		closed:    m.State.Sealed(),
		lastEntry: m.LastEntry,
		lac:       -1,
		reads:     make(map[int64]*readOp),
	}, nil
}

// Readable reports whether entry may be read now.
func (r *Reader) Readable(entry int64) bool {
	if entry < 0 {
		return false
	}
	if r.closed {
		return entry <= r.lastEntry
	}
	return entry <= r.lac
}

// LAC is the highest readable entry: the learned LAC on an open ledger, the
// last entry on a closed one.
func (r *Reader) LAC() int64 {
	if r.closed {
		return r.lastEntry
	}
	return r.lac
}

// Step feeds one event and returns the actions to carry out, in order. An
// error means the event was refused (Read of an unreadable entry, or
// beyond MaxOutstandingReads).
func (r *Reader) Step(ev Event) ([]Action, error) {
	var err error
	switch ev := ev.(type) {
	case Read:
		err = r.read(ev.Entry)
	case ReadOK:
		if op := r.answered(ev.Bookie, ev.Entry); op != nil {
			delete(r.reads, ev.Entry)
			r.emit(Deliver{Entry: ev.Entry, Payload: ev.Payload})
		}
	case ReadNoEntry:
		r.miss(ev.Bookie, ev.Entry)
	case ReadFailed:
		r.miss(ev.Bookie, ev.Entry)
	case SpeculativeTimeout:
		if op := r.reads[ev.Entry]; op != nil {
			r.askNext(ev.Entry, op)
		}
	case LacLearned:
		r.lac = max(r.lac, ev.LAC)
	case MetadataChanged:
		err = r.metadataChanged(ev)
	default:
		err = fmt.Errorf("%w: a reader does not take %v", ErrInvalidEvent, ev)
	}
	out := r.out
	r.out = nil
	return out, err
}

func (r *Reader) emit(a Action) { r.out = append(r.out, a) }

func (r *Reader) read(entry int64) error {
	if !r.Readable(entry) {
		if r.closed {
			return fmt.Errorf("%w: entry %d is beyond the closed ledger's last entry %d", ErrNotReadable, entry, r.lastEntry)
		}
		return fmt.Errorf("%w: entry %d is beyond the LAC %d", ErrNotReadable, entry, r.lac)
	}
	if _, ok := r.reads[entry]; ok {
		return nil // already in progress
	}
	if len(r.reads) >= r.cfg.MaxOutstandingReads {
		return fmt.Errorf("%w: %d", ErrTooManyReads, len(r.reads))
	}
	seg := r.segmentOf(entry)
	op := &readOp{}
	for _, i := range r.sched.ReadOrder(entry) {
		op.bookies = append(op.bookies, seg.Bookies[i])
	}
	r.reads[entry] = op
	r.askNext(entry, op)
	return nil
}

// segmentOf is the segment holding entry: the last one starting at or
// before it.
func (r *Reader) segmentOf(entry int64) catalog.EnsembleSegment {
	k := len(r.segments) - 1
	for k > 0 && r.segments[k].FirstEntry > entry {
		k--
	}
	return r.segments[k]
}

func (r *Reader) askNext(entry int64, op *readOp) {
	if op.next >= len(op.bookies) {
		return
	}
	r.emit(SendRead{Bookie: op.bookies[op.next], Entry: entry})
	op.next++
	op.outstanding++
}

// answered returns the read of entry if bookie was asked for it, counting
// the answer; nil for a stale or stray answer.
func (r *Reader) answered(bookie string, entry int64) *readOp {
	op := r.reads[entry]
	if op == nil {
		return nil
	}
	k := slices.Index(op.bookies[:op.next], bookie)
	if k < 0 || op.answered.has(k) {
		return nil
	}
	op.answered = op.answered.with(k)
	op.outstanding--
	return op
}

func (r *Reader) miss(bookie string, entry int64) {
	op := r.answered(bookie, entry)
	if op == nil || op.outstanding > 0 {
		return // another replica may still answer
	}
	if op.next < len(op.bookies) {
		r.askNext(entry, op)
		return
	}
	delete(r.reads, entry)
	r.emit(ReadError{Entry: entry, Err: fmt.Errorf("%w: entry %d from %v", ErrEntryUnavailable, entry, op.bookies)})
}

func (r *Reader) metadataChanged(ev MetadataChanged) error {
	switch {
	case len(ev.Ensembles) < len(r.segments):
		return fmt.Errorf("%w: metadata lost ensemble segments", ErrInvalidEvent)
	case r.closed && (!ev.Closed || ev.LastEntry != r.lastEntry):
		return fmt.Errorf("%w: a closed ledger's end cannot change", ErrInvalidEvent)
	case ev.Closed && ev.LastEntry < r.lac:
		// An LAC is only ever an acknowledged entry, and recovery keeps
		// every acknowledged entry: this would be a lost entry.
		return fmt.Errorf("%w: closed at %d below the LAC %d", ErrInvalidEvent, ev.LastEntry, r.lac)
	}
	r.segments = cloneSegments(ev.Ensembles)
	r.closed, r.lastEntry = ev.Closed, ev.LastEntry
	return nil
}
