package ledger

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/catalog"
)

type writerState uint8

const (
	writerOpen    writerState = iota + 1 // takes appends
	writerClosing                        // Close was asked; settling pending appends
	writerClosed                         // CloseLedger was emitted; ignores everything
	writerStopped                        // fenced or given up; ignores everything
)

// Writer is the write side of one ledger (BookKeeper's LedgerHandle with its
// PendingAddOps): it assigns entry ids, stripes each entry over its write
// set, acknowledges entries in order once Qa bookies stored them, keeps the
// LAC, replaces failed bookies through the wrapper, stops when fenced and
// seals the ledger on Close. It does no I/O: Step takes one Event and
// returns the Actions the wrapper must carry out.
//
// Events: Append, AddAcked, AddFailed, Tick, BookieReplaced,
// EnsembleChangeFailed, Stop, Close. Actions: SendAdd, SendWriteLac,
// Acknowledge, FailAppend, EnsembleChangeNeeded, Stopped, CloseLedger.
type Writer struct {
	cfg   Config
	sched Schedule

	// segments mirrors the ledger's ensembles in the catalog as this writer
	// last stored them. Invariants: segments[0].FirstEntry == 0; FirstEntry
	// strictly increases; the last segment's FirstEntry <= lac+1, so every
	// pending entry belongs to the last segment. Positions below (acks,
	// failures) are positions in the last segment.
	segments []catalog.EnsembleSegment

	// lac is the last add confirmed: the highest entry acknowledged to the
	// caller, -1 before the first. Invariants: entries 0..lac were
	// acknowledged, each exactly once and in entry order, each only once Qa
	// bookies of its write set — in the segment the catalog assigns it to —
	// had acked it (no acknowledged entry is lost while Qa-1 of them fail);
	// lac never decreases.
	lac int64

	// pending holds entries lac+1 .. lac+len(pending) in order: assigned by
	// Append, not yet acknowledged. Invariant: len(pending) <= MaxInFlight.
	pending []*pendingAdd
	// next is the id the next Append gets. Invariant: while the writer
	// runs, next == lac+len(pending)+1 (entry ids are dense).
	next int64

	// lacSent is the highest LAC carried by any message sent (piggybacked on
	// an add or pushed by WriteLac). Invariant: lacSent <= lac, so bookies
	// (and readers through them) never see an LAC beyond an acknowledged
	// entry.
	lacSent int64
	// busy records that an add was sent since the last Tick.
	busy bool

	// failed holds positions whose bookie failed and awaits replacement.
	// Invariant: no pending entry counts an ack from a failed position (a
	// replaced bookie's acks must not count, since the catalog will say the
	// entry lives on its replacement), and nothing is sent to one.
	failed idxSet
	// change is the ensemble change the wrapper is carrying out, or nil. At
	// most one is in flight. Invariant: change.from <= lac+1.
	change *ensembleChange
	// changes counts EnsembleChangeNeeded actions; <= MaxEnsembleChanges.
	changes int
	// rejoinRefunds counts changes answered by rejoins alone, which were
	// not counted in changes; <= maxRejoinRefunds.
	rejoinRefunds int

	state writerState
	err   error // why the writer stopped; non-nil iff state == writerStopped

	out []Action // actions of the current Step
}

// maxRejoinRefunds bounds how many ensemble changes answered only by
// rejoining bookies are not counted against MaxEnsembleChanges.
const maxRejoinRefunds = 256

type pendingAdd struct {
	entry   int64
	payload []byte
	sent    idxSet // positions the entry was sent to (in the last segment)
	acked   idxSet // positions that acked it; a subset of sent, never failed
}

type ensembleChange struct {
	from   int64  // first entry of the new segment
	failed idxSet // positions the wrapper was asked to replace
}

// NewWriter returns the writer of a ledger just created with ensemble as
// its only segment (from entry 0). cfg must be valid.
func NewWriter(cfg Config, ensemble []string) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := validEnsemble(ensemble, cfg.Replication.Ensemble); err != nil {
		return nil, err
	}
	sched, _ := NewSchedule(cfg.Replication)
	return &Writer{
		cfg:      cfg,
		sched:    sched,
		segments: []catalog.EnsembleSegment{{FirstEntry: 0, Bookies: slices.Clone(ensemble)}},
		lac:      -1,
		next:     0,
		lacSent:  -1,
		state:    writerOpen,
	}, nil
}

// NextEntry is the id the next Append gets.
func (w *Writer) NextEntry() int64 { return w.next }

// LAC is the last add confirmed: the last acknowledged entry, or -1.
func (w *Writer) LAC() int64 { return w.lac }

// Pending is the number of entries appended and not yet acknowledged.
func (w *Writer) Pending() int { return len(w.pending) }

// Segments returns the ensembles as the writer last stored them.
func (w *Writer) Segments() []catalog.EnsembleSegment { return cloneSegments(w.segments) }

// Err is why the writer stopped, or nil while it runs.
func (w *Writer) Err() error { return w.err }

// Step feeds one event and returns the actions to carry out, in order. An
// error means the event was refused (Append under backpressure, after
// Close or after the writer stopped; an event the writer cannot take) and
// the writer's state did not change.
func (w *Writer) Step(ev Event) ([]Action, error) {
	var err error
	switch ev := ev.(type) {
	case Append:
		err = w.append(ev.Payload)
	case AddAcked:
		w.addAcked(ev)
	case AddFailed:
		w.addFailed(ev)
	case Tick:
		w.tick()
	case BookieReplaced:
		err = w.bookieReplaced(ev)
	case EnsembleChangeFailed:
		if w.state == writerStopped {
			break // the change was abandoned with the writer
		}
		if w.change == nil {
			err = fmt.Errorf("%w: no ensemble change in flight", ErrInvalidEvent)
			break
		}
		w.change = nil // asked again on the next Tick
		w.maybeClose() // unless nothing is left to write
	case Stop:
		if ev.Err == nil {
			err = fmt.Errorf("%w: stop without an error", ErrInvalidEvent)
			break
		}
		w.stop(ev.Err)
	case Close:
		err = w.close()
	default:
		err = fmt.Errorf("%w: the writer does not take %v", ErrInvalidEvent, ev)
	}
	out := w.out
	w.out = nil
	return out, err
}

func (w *Writer) emit(a Action) { w.out = append(w.out, a) }

func (w *Writer) last() catalog.EnsembleSegment { return w.segments[len(w.segments)-1] }

// position is bookie's position in the last segment, or -1.
func (w *Writer) position(bookie string) int { return slices.Index(w.last().Bookies, bookie) }

func (w *Writer) pendingFor(entry int64) *pendingAdd {
	i := entry - w.lac - 1
	if i < 0 || i >= int64(len(w.pending)) {
		return nil
	}
	return w.pending[i]
}

func (w *Writer) append(payload []byte) error {
	switch {
	case w.state == writerStopped:
		return w.err
	case w.state != writerOpen:
		return ErrClosed
	case len(payload) > w.cfg.MaxEntryBytes:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(payload), w.cfg.MaxEntryBytes)
	case len(w.pending) >= w.cfg.MaxInFlight:
		return fmt.Errorf("%w: %d entries unacknowledged", ErrInFlightLimit, len(w.pending))
	}
	p := &pendingAdd{entry: w.next, payload: payload}
	w.pending = append(w.pending, p)
	w.next++
	w.send(p)
	return nil
}

// send sends p to every position of its write set that is neither failed
// nor already sent to, piggybacking the LAC.
func (w *Writer) send(p *pendingAdd) {
	bookies := w.last().Bookies
	for _, i := range w.sched.WriteSet(p.entry) {
		if w.failed.has(i) || p.sent.has(i) {
			continue
		}
		p.sent = p.sent.with(i)
		w.emit(SendAdd{Bookie: bookies[i], Entry: p.entry, LAC: w.lac, Payload: p.payload})
		w.lacSent = max(w.lacSent, w.lac)
		w.busy = true
	}
}

func (w *Writer) addAcked(ev AddAcked) {
	if w.state == writerStopped || w.state == writerClosed {
		return
	}
	i := w.position(ev.Bookie)
	p := w.pendingFor(ev.Entry)
	// Stale (already acknowledged, or from a bookie since replaced),
	// duplicate, or not asked for: nothing to learn.
	if i < 0 || p == nil || !p.sent.has(i) || w.failed.has(i) {
		return
	}
	p.acked = p.acked.with(i)
	w.advance()
}

// advance acknowledges the entries at the head of pending that reached Qa,
// in order.
func (w *Writer) advance() {
	for len(w.pending) > 0 && w.sched.ackQuorum(w.pending[0].acked, w.pending[0].entry) {
		w.lac = w.pending[0].entry
		w.emit(Acknowledge{Entry: w.lac})
		w.pending[0] = nil
		w.pending = w.pending[1:]
	}
	if w.cfg.EagerLac && len(w.pending) == 0 && w.lac > w.lacSent && w.state == writerOpen {
		// Idle: no later add will carry this LAC soon, so push it now
		// rather than at the next quiet tick; tail readers see the entry
		// within a round trip of its acknowledgement. Under load the
		// next add carries it and nothing extra is sent.
		w.pushLac()
	}
	w.maybeClose()
}

// pushLac sends the LAC to every bookie of the last segment in service.
func (w *Writer) pushLac() {
	for i, b := range w.last().Bookies {
		if !w.failed.has(i) {
			w.emit(SendWriteLac{Bookie: b, LAC: w.lac})
		}
	}
	w.lacSent = w.lac
}

func (w *Writer) addFailed(ev AddFailed) {
	if w.state == writerStopped || w.state == writerClosed {
		return
	}
	switch ev.Reason {
	case FailFenced:
		// Any fenced bookie means a recovery has begun: stop at once, as
		// BookKeeper does, rather than race it (the recovery decides).
		w.stop(fmt.Errorf("bookie %s fenced entry %d: %w", ev.Bookie, ev.Entry, ErrFenced))
		return
	case FailUnauthorized:
		w.stop(fmt.Errorf("bookie %s rejected entry %d: %w", ev.Bookie, ev.Entry, ErrUnauthorized))
		return
	}
	i := w.position(ev.Bookie)
	if i < 0 || ev.Entry < 0 || ev.Entry >= w.NextEntry() {
		return // a bookie already replaced, or garbage
	}
	w.markFailed(i)
}

// markFailed takes position i out of service until the wrapper replaces its
// bookie, and asks for that.
func (w *Writer) markFailed(i int) {
	if w.failed.has(i) {
		return
	}
	w.failed = w.failed.with(i)
	for _, p := range w.pending {
		p.acked = p.acked.without(i)
		p.sent = p.sent.without(i)
	}
	w.requestChange()
}

// requestChange asks the wrapper to replace the failed positions, unless a
// change is in flight or not needed.
func (w *Writer) requestChange() {
	if w.change != nil || w.failed == 0 || (w.state != writerOpen && w.state != writerClosing) {
		return
	}
	if w.state == writerClosing && len(w.pending) == 0 {
		return // nothing left to write: close instead
	}
	if w.changes >= w.cfg.MaxEnsembleChanges {
		w.stop(fmt.Errorf("%w: %d asked", ErrTooManyEnsembleChanges, w.changes))
		return
	}
	w.changes++
	w.change = &ensembleChange{from: w.lac + 1, failed: w.failed}
	last := w.last()
	var failed []string
	for i, b := range last.Bookies {
		if w.failed.has(i) {
			failed = append(failed, b)
		}
	}
	w.emit(EnsembleChangeNeeded{FromEntry: w.change.from, Ensemble: slices.Clone(last.Bookies), Failed: failed})
}

func (w *Writer) bookieReplaced(ev BookieReplaced) error {
	if w.state == writerStopped {
		return nil // the change was abandoned with the writer
	}
	if w.change == nil {
		return fmt.Errorf("%w: no ensemble change in flight", ErrInvalidEvent)
	}
	if ev.FirstEntry != w.change.from {
		return fmt.Errorf("%w: segment starts at entry %d, the change asked for %d", ErrInvalidEvent, ev.FirstEntry, w.change.from)
	}
	if err := validEnsemble(ev.Ensemble, w.sched.e); err != nil {
		return err
	}
	last := w.last()
	// A failed position is answered by a new bookie, or by the same one
	// when it rejoins (ev.Rejoined). A failed position that keeps its
	// bookie without rejoining stays failed (asked again below).
	var replaced idxSet
	for i, b := range ev.Ensemble {
		switch {
		case b == last.Bookies[i] && w.change.failed.has(i) && slices.Contains(ev.Rejoined, b):
			replaced = replaced.with(i)
		case b == last.Bookies[i]:
		case !w.change.failed.has(i):
			return fmt.Errorf("%w: position %d (%s) was not failed but is replaced by %s", ErrInvalidEvent, i, last.Bookies[i], b)
		default:
			replaced = replaced.with(i)
		}
	}
	seg := catalog.EnsembleSegment{FirstEntry: ev.FirstEntry, Bookies: slices.Clone(ev.Ensemble)}
	switch {
	case slices.Equal(ev.Ensemble, last.Bookies): // every failed bookie rejoined
		// Nothing changed in the catalog: the change does not count
		// against MaxEnsembleChanges (bookies restarting again and again
		// would otherwise fail the ledger), up to maxRejoinRefunds times.
		if w.rejoinRefunds < maxRejoinRefunds {
			w.rejoinRefunds++
			w.changes--
		}
	case ev.FirstEntry == last.FirstEntry:
		w.segments[len(w.segments)-1] = seg
	default:
		w.segments = append(w.segments, seg)
	}
	w.failed &^= replaced
	w.change = nil
	// Every unacknowledged entry whose write set holds a replaced position
	// goes to the replacement: the catalog now says it lives there.
	for _, p := range w.pending {
		if p.sent&w.sched.writeSet(p.entry)&replaced != 0 || p.acked&replaced != 0 {
			panic(fmt.Sprintf("ledger: entry %d counts a replaced position", p.entry)) // markFailed cleared them
		}
		w.send(p)
	}
	w.requestChange() // positions that failed meanwhile
	w.maybeClose()
	return nil
}

func (w *Writer) tick() {
	if w.state != writerOpen && w.state != writerClosing {
		return
	}
	if !w.busy && w.lac > w.lacSent {
		w.pushLac()
	}
	w.busy = false
	w.requestChange() // retry one that failed
}

func (w *Writer) close() error {
	switch w.state {
	case writerStopped:
		return w.err
	case writerOpen:
		w.state = writerClosing
		w.maybeClose()
	}
	return nil // already closing or closed
}

// maybeClose seals the ledger once Close was asked and nothing is pending:
// the last entry is the LAC, so every acknowledged entry is inside.
func (w *Writer) maybeClose() {
	if w.state != writerClosing || len(w.pending) > 0 || w.change != nil {
		return
	}
	w.state = writerClosed
	w.emit(CloseLedger{LastEntry: w.lac})
}

// stop fails every pending append with err and stops the writer for good.
func (w *Writer) stop(err error) {
	if w.state == writerStopped || w.state == writerClosed {
		return
	}
	for _, p := range w.pending {
		w.emit(FailAppend{Entry: p.entry, Err: err})
	}
	w.pending = nil
	w.change = nil
	w.state = writerStopped
	w.err = err
	w.emit(Stopped{Err: err})
}

func cloneSegments(s []catalog.EnsembleSegment) []catalog.EnsembleSegment {
	out := make([]catalog.EnsembleSegment, len(s))
	for i, seg := range s {
		out[i] = catalog.EnsembleSegment{FirstEntry: seg.FirstEntry, Bookies: slices.Clone(seg.Bookies)}
	}
	return out
}
