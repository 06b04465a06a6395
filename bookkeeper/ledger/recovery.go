package ledger

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/catalog"
)

type recoveryPhase uint8

const (
	recoveryIdle    recoveryPhase = iota + 1 // Start not called yet
	recoveryFencing                          // waiting for fences to cover the ensemble
	recoveryReading                          // reading forward and writing back
	recoveryDone                             // CloseLedger was emitted
	recoveryFailed                           // RecoveryFailed was emitted
)

// Recovery decides where a ledger whose writer is gone (or must be fenced
// out) ends, the way BookKeeper's LedgerRecoveryOp does, with the fixes of
// PR #2616 and PR #2654. The wrapper first stores the ledger IN_RECOVERY
// (compare-and-set), then runs one Recovery over the metadata it read:
//
//  1. Fence: SendFence to every bookie of the last ensemble segment. Once
//     the fenced bookies cover the ensemble (ack quorum coverage: every
//     write set has Qw-Qa+1 fenced members), no entry can newly reach Qa
//     through normal adds, so the old writer can acknowledge nothing new.
//  2. Read forward from max(highest reported LAC + 1, the last segment's
//     first entry) — entries before that segment were all acknowledged
//     before the segment was created (PR #2654) — with fence_and_read
//     recovery reads (PR #2616) to the entry's write set in the last
//     segment, and to nobody else. An entry is recovered as soon as one
//     bookie returns it (BookKeeper and the TLA+ spec are generous on
//     positives: any stored copy came from the one writer and may have
//     been acknowledged); it is absent once Qw-Qa+1 of its write set answer
//     "no such entry" (those bookies are fenced, so no Qa of the write set
//     holds it or ever will); if every member answered and neither holds,
//     recovery fails — it never guesses.
//  3. Write back each recovered entry to its whole write set with recovery
//     adds (allowed on a fenced ledger), and once every one reached Qa,
//     emit CloseLedger at the last recovered entry (the entry before the
//     first absent one). The wrapper stores IN_RECOVERY → CLOSED with it.
//
// Why the end is right: an acknowledged entry is on Qa bookies of its write
// set, so at most Qw-Qa of it can answer "no such entry" and it is never
// judged absent; entries are acknowledged in order, so all entries before
// it are recovered too. An entry judged absent had Qw-Qa+1 fenced bookies
// without it, so the old writer can never get Qa acks for it afterwards —
// without fencing on the read (PR #2616) one of those bookies could still
// take the old writer's add, and the writer acknowledge an entry beyond the
// closed end.
//
// Events: FenceOK, FenceFailed, ReadOK, ReadNoEntry, ReadFailed, AddAcked,
// AddFailed. Actions: SendFence, SendRecoveryRead, SendAdd (Recovery),
// CloseLedger, RecoveryFailed.
type Recovery struct {
	cfg   Config
	sched Schedule

	// seg is the last ensemble segment when recovery began. Invariant: it
	// is the only ensemble recovery sends to or counts answers from, and
	// only positions of an entry's write set count for that entry.
	seg catalog.EnsembleSegment

	phase recoveryPhase

	// fenced and fenceFailed are the positions whose fence answered yes or
	// failed. Invariant: reading starts only once fenced covers the ensemble.
	fenced, fenceFailed idxSet
	// maxLAC is the highest LAC a fenced bookie reported (-1 if none).
	// Invariant: maxLAC <= the old writer's LAC (bookies only learn an LAC
	// from the writer, which never sends one beyond its acknowledged entries).
	maxLAC int64
	// start is the first entry read: max(maxLAC+1, seg.FirstEntry).
	// Entries before it were acknowledged.
	start int64

	// reads are the entries being read, in order: reads[i] is entry
	// recovered+1+i. Invariant: len(reads) <= RecoveryReadWindow.
	reads []*recoveryRead
	// recovered is the highest entry judged present (start-1 before any).
	// Invariant: every entry in [start, recovered] was judged present, in
	// order, and handed to write-back.
	recovered   int64
	lastPayload []byte // payload of recovered, if recovered >= start
	// ended is set once an entry was judged absent; the end is then
	// recovered. Invariant: once ended, nothing more is read.
	ended bool

	// adds are recovered entries written back and not yet at Qa, in order.
	// Invariant: len(adds) <= MaxInFlight (reading pauses when full).
	adds []*recoveryAdd

	err error // why recovery failed; non-nil iff phase == recoveryFailed
	out []Action
}

type recoveryRead struct {
	entry    int64
	asked    idxSet // the write set
	answered idxSet // positions that answered (any way)
	neg      idxSet // positions that answered "no such entry"
	ok       bool
	payload  []byte
}

type recoveryAdd struct {
	entry   int64
	payload []byte
	acked   idxSet
	failed  idxSet
}

// NewRecovery returns the recovery of a ledger whose ensembles are segments
// (as read from the catalog, where the ledger is now IN_RECOVERY). cfg must
// be valid and match the ledger's replication.
func NewRecovery(cfg Config, segments []catalog.EnsembleSegment) (*Recovery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if len(segments) == 0 {
		return nil, fmt.Errorf("%w: no ensemble segments", ErrInvalidEvent)
	}
	last := segments[len(segments)-1]
	if err := validEnsemble(last.Bookies, cfg.Replication.Ensemble); err != nil {
		return nil, err
	}
	sched, _ := NewSchedule(cfg.Replication)
	return &Recovery{
		cfg:    cfg,
		sched:  sched,
		seg:    catalog.EnsembleSegment{FirstEntry: last.FirstEntry, Bookies: slices.Clone(last.Bookies)},
		phase:  recoveryIdle,
		maxLAC: -1,
	}, nil
}

// Start begins the recovery: it fences every bookie of the last segment.
func (r *Recovery) Start() []Action {
	if r.phase != recoveryIdle {
		return nil
	}
	r.phase = recoveryFencing
	for _, b := range r.seg.Bookies {
		r.emit(SendFence{Bookie: b})
	}
	return r.flush()
}

// End returns the decided last entry once the recovery is done.
func (r *Recovery) End() (int64, bool) { return r.recovered, r.phase == recoveryDone }

// StartEntry is the first entry recovery reads (valid once reading began).
func (r *Recovery) StartEntry() int64 { return r.start }

// Err is why the recovery failed, or nil.
func (r *Recovery) Err() error { return r.err }

// Step feeds one event and returns the actions to carry out, in order.
// Answers that are stale (for an entry already decided), duplicated, or
// from a bookie that was not asked — in particular any bookie outside the
// entry's write set in the last segment — are ignored. An error means the
// event is not one a recovery takes.
func (r *Recovery) Step(ev Event) ([]Action, error) {
	switch ev := ev.(type) {
	case FenceOK:
		r.fenceAnswered(ev.Bookie, true, ev.LAC)
	case FenceFailed:
		r.fenceAnswered(ev.Bookie, false, -1)
	case ReadOK:
		r.readAnswered(ev.Bookie, ev.Entry, func(rd *recoveryRead, _ int) {
			if !rd.ok {
				rd.ok, rd.payload = true, ev.Payload
			}
		})
	case ReadNoEntry:
		r.readAnswered(ev.Bookie, ev.Entry, func(rd *recoveryRead, i int) { rd.neg = rd.neg.with(i) })
	case ReadFailed:
		r.readAnswered(ev.Bookie, ev.Entry, func(*recoveryRead, int) {})
	case AddAcked:
		r.addAnswered(ev.Bookie, ev.Entry, 0)
	case AddFailed:
		r.addAnswered(ev.Bookie, ev.Entry, ev.Reason)
	default:
		return nil, fmt.Errorf("%w: a recovery does not take %v", ErrInvalidEvent, ev)
	}
	return r.flush(), nil
}

func (r *Recovery) emit(a Action) { r.out = append(r.out, a) }

func (r *Recovery) flush() []Action {
	out := r.out
	r.out = nil
	return out
}

func (r *Recovery) fail(format string, args ...any) {
	r.err = fmt.Errorf("%w: %s", ErrRecoveryFailed, fmt.Sprintf(format, args...))
	r.phase = recoveryFailed
	r.reads, r.adds = nil, nil
	r.emit(RecoveryFailed{Err: r.err})
}

func (r *Recovery) fenceAnswered(bookie string, ok bool, lac int64) {
	i := slices.Index(r.seg.Bookies, bookie)
	if r.phase != recoveryFencing || i < 0 || r.fenced.has(i) || r.fenceFailed.has(i) {
		return // late answers are not needed: reading already covers them
	}
	if !ok {
		r.fenceFailed = r.fenceFailed.with(i)
		if r.sched.ensembleCoverageLost(r.fenceFailed) {
			r.fail("fencing failed on %d bookies of %v; a write set cannot be covered", r.fenceFailed.count(), r.seg.Bookies)
		}
		return
	}
	r.fenced = r.fenced.with(i)
	r.maxLAC = max(r.maxLAC, lac)
	if r.sched.ensembleCovered(r.fenced) {
		r.startReading()
	}
}

func (r *Recovery) startReading() {
	r.phase = recoveryReading
	r.start = max(r.maxLAC+1, r.seg.FirstEntry)
	if r.cfg.unsafe.readBelowSegment {
		r.start = r.maxLAC + 1
	}
	r.recovered = r.start - 1
	r.fill()
}

// fill issues reads up to the window, unless the end is known or the
// write-back queue is full.
func (r *Recovery) fill() {
	for !r.ended && len(r.reads) < r.cfg.RecoveryReadWindow && len(r.adds) < r.cfg.MaxInFlight {
		e := r.recovered + int64(len(r.reads)) + 1
		rd := &recoveryRead{entry: e, asked: r.sched.writeSet(e)}
		r.reads = append(r.reads, rd)
		for _, i := range r.sched.WriteSet(e) {
			r.emit(SendRecoveryRead{Bookie: r.seg.Bookies[i], Entry: e, Fence: !r.cfg.unsafe.noReadFence})
		}
	}
}

func (r *Recovery) readAnswered(bookie string, entry int64, record func(*recoveryRead, int)) {
	if r.phase != recoveryReading || r.ended {
		return
	}
	k := entry - r.recovered - 1
	if k < 0 || k >= int64(len(r.reads)) {
		return // decided already, or never asked
	}
	rd := r.reads[k]
	i := slices.Index(r.seg.Bookies, bookie)
	if i < 0 || !rd.asked.has(i) || rd.answered.has(i) {
		return // outside the entry's write set in the last segment (PR #2654), or a duplicate
	}
	rd.answered = rd.answered.with(i)
	record(rd, i)
	r.decide()
}

// decide settles the reads at the head of the window, in entry order.
func (r *Recovery) decide() {
	for len(r.reads) > 0 {
		rd := r.reads[0]
		switch {
		case rd.ok:
			r.recovered, r.lastPayload = rd.entry, rd.payload
			r.reads = r.reads[1:]
			r.writeBack(rd.entry, rd.payload)
		case r.sched.entryAbsent(rd.neg, rd.entry):
			r.ended = true
			r.reads = nil
		case rd.answered == rd.asked:
			r.fail("entry %d: %d of write set %v said no such entry, the others failed; cannot tell whether it reached Qa",
				rd.entry, rd.neg.count(), rd.asked)
			return
		default:
			r.fill()
			return
		}
	}
	r.fill()
	r.maybeClose()
}

func (r *Recovery) writeBack(entry int64, payload []byte) {
	r.adds = append(r.adds, &recoveryAdd{entry: entry, payload: payload})
	for _, i := range r.sched.WriteSet(entry) {
		// The LAC carried is one every recovery agrees is acknowledged.
		r.emit(SendAdd{Bookie: r.seg.Bookies[i], Entry: entry, LAC: r.start - 1, Payload: payload, Recovery: true})
	}
}

func (r *Recovery) addAnswered(bookie string, entry int64, reason FailReason) {
	if r.phase != recoveryReading || len(r.adds) == 0 {
		return
	}
	k := entry - r.adds[0].entry
	if k < 0 || k >= int64(len(r.adds)) {
		return
	}
	a := r.adds[k]
	i := slices.Index(r.seg.Bookies, bookie)
	if i < 0 || !r.sched.inWriteSet(entry, i) || a.acked.has(i) || a.failed.has(i) {
		return
	}
	switch reason {
	case 0:
		a.acked = a.acked.with(i)
	case FailUnauthorized:
		r.fail("bookie %s rejected the recovery add of entry %d: master key mismatch", bookie, entry)
		return
	default:
		a.failed = a.failed.with(i)
		if r.sched.quorumLost(a.failed, entry) {
			r.fail("recovery add of entry %d failed on %d bookies; cannot reach Qa", entry, a.failed.count())
			return
		}
	}
	for len(r.adds) > 0 && r.sched.ackQuorum(r.adds[0].acked, r.adds[0].entry) {
		r.adds = r.adds[1:]
	}
	r.fill()
	r.maybeClose()
}

func (r *Recovery) maybeClose() {
	if r.phase != recoveryReading || !r.ended || len(r.adds) > 0 {
		return
	}
	r.phase = recoveryDone
	var payload []byte
	if r.recovered >= r.start {
		payload = r.lastPayload
	}
	r.emit(CloseLedger{LastEntry: r.recovered, LastPayload: payload})
}
