package machine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

// MaxEntryBytesLimit is the bookie protocol's entry bound: no entry is
// larger, entry header included.
const MaxEntryBytesLimit = 8 << 20

// MaxBatchBytes is the largest batch the writer takes: an entry of it alone,
// with an entry header, is within MaxEntryBytesLimit.
const MaxBatchBytes = MaxEntryBytesLimit - record.EntryHeaderSize

// Retry bounds of a failed I/O step: the first retry after RetryMin, each
// next one twice as late, at most RetryMax.
const (
	RetryMin = 10 * time.Millisecond
	RetryMax = 5 * time.Second
)

// Config is what the machine needs to decide; package partition validates
// and defaults it.
type Config struct {
	Topic     string
	Partition int
	// Epoch is the writer lease's epoch, stamped on every batch as its
	// partition leader epoch.
	Epoch              int64
	MaxEntryBytes      int
	MaxInFlightEntries int
	MaxBufferedBytes   int64
	Linger             time.Duration
	RollBytes          int64
	RollAge            time.Duration
}

// Phase is where the writer is in its life.
type Phase uint8

const (
	// Replacing: no ledger takes entries — the first is being opened, or a
	// failed one is being recovered and replaced. Batches are refused
	// (ErrUnavailable): offsets after a failed ledger are known only once
	// its recovery decided where it ends.
	Replacing Phase = iota + 1
	// Open: entries are sent to the ledger.
	Open
	// Rolling: the ledger drains, is sealed and a new one opened; batches
	// queue meanwhile (their offsets follow the last one sent).
	Rolling
	// Closing: Close was asked; in-flight entries settle, then the seal and
	// the lease release.
	Closing
	// Stopped: the lease is lost (ErrFenced), or a recovery lost
	// acknowledged records (ErrLostAcknowledged). Final.
	Stopped
	// Closed: Close finished (or timed out). Final.
	Closed
)

func (p Phase) String() string {
	switch p {
	case Replacing:
		return "replacing"
	case Open:
		return "open"
	case Rolling:
		return "rolling"
	case Closing:
		return "closing"
	case Stopped:
		return "stopped"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// op is the I/O step the driver is carrying out for the machine; at most one
// at a time.
type op uint8

const (
	opNone op = iota
	opOpen
	opSeal
	opRecover
	opRelease
)

// Writer is the partition writer's state machine: the single writer of one
// partition under one lease. It gives accepted batches offsets, packs them
// into entries, keeps at most MaxInFlightEntries unacknowledged, answers a
// batch once its entry settled, rolls the ledger by size and age, replaces
// a failed one after its recovery decided its end, and hands the partition
// over on Close. It does no I/O and reads no clock; see the package doc for
// the driver's contract and the invariants.
//
// Not safe for concurrent use: the driver serialises Step.
type Writer struct {
	cfg       Config
	producers *dedup.State
	// txns: the open transactions (their first offsets; the LSO).
	txns *txns
	// maxEntry is the bound on an entry's batches: MaxEntryBytes, leaving
	// room for the entry header.
	maxEntry int

	// phase: see Phase. err is why the writer stopped (Stopped, Closed).
	phase Phase
	err   error

	// next is the offset the next accepted batch gets. Invariant (Open,
	// Rolling): next-1 is the last offset of the last queued entry, else
	// lastSent. After a failed ledger it is stale until the recovery sets
	// it; then it may move back (the failed batches' offsets are given
	// again) — so it is not a high watermark: AckedOffset is.
	next int64
	// lastSent is the last offset of the last entry sent to the current
	// ledger (or, with none, the last offset the chain holds).
	// Invariant: acked <= lastSent < next.
	lastSent int64
	// acked is the durable end: every offset up to it is stored and
	// readable — acknowledged by this writer, in the chain when it opened,
	// or kept by a failed ledger's recovery. Never decreases; a recovery
	// that decides an end below it stops the writer (ErrLostAcknowledged).
	acked int64

	// ledger is the ledger being written, drained or recovered; nil while
	// one is being opened, or after a roll sealed it.
	ledger *ledger
	// gen counts ledgers opened; a Settled for another generation is stale.
	gen int64

	// queue: entries not yet sent, in offset order; only the last may be
	// unsealed (still filling). Empty in Replacing, Stopped and Closed.
	queue []*entry
	// inflight: entries sent to ledger and not yet settled, in entry order.
	// Invariant: len(inflight) <= MaxInFlightEntries; empty unless ledger
	// is set and not failed.
	inflight []*entry
	// buffered is the bytes of every batch in queue and inflight.
	// Invariant: buffered <= MaxBufferedBytes.
	buffered int64
	// lingerArmed: an ArmLinger is pending for the filling entry.
	lingerArmed bool

	// byBase finds the tag of an idempotent producer's batch in flight by
	// its base offset, so a retry attaches to it.
	byBase map[int64]any

	// op is the I/O step outstanding (opNone when none); retryArmed: a
	// RetryAfter is pending instead. Never both.
	op         op
	retryArmed bool
	backoff    time.Duration
	// finished: Finished was emitted.
	finished bool

	out []Action
}

// ledger is the state of the ledger being written.
type ledger struct {
	handle any
	id     catalog.LedgerID
	gen    int64
	// first is its first offset; bytes what was sent to it; born when it
	// opened — for the roll rules.
	first int64
	bytes int64
	born  time.Time
	// seq is the sequence number the next Send gets.
	seq int64
	// failed: an entry failed; the ledger awaits recovery (or, when closing,
	// is left to the next owner's).
	failed bool
}

// entry is one ledger entry: batches back to back, after room for the
// entry header.
type entry struct {
	// buf is EntryHeaderSize bytes for the header, then the batches.
	buf   []byte
	tags  []any
	first int64
	last  int64 // offset of the last record in it
	// lso is the last stable offset as of the entry's end (the queued
	// view's, set whenever a batch goes in: the entry is then the last).
	// Below last+1, a transaction is open and the entry gets a header.
	lso int64
	seq int64 // its Send's Seq, once sent
	// idem: the base offsets of its idempotent producers' batches (keys
	// of byBase).
	idem []int64
	// sealed: no more batches go in (full, or sent).
	sealed bool
}

// New returns a writer in Replacing whose chain ends at lastOffset (the
// partition's next offset is lastOffset+1), with the idempotent producers'
// state and the open transactions rebuilt from the chain's tail, and the
// first action to carry out: OpenLedger. It panics if open is malformed
// (negative fields, a producer twice, a first offset beyond lastOffset):
// the driver checks what it read.
func New(cfg Config, producers *dedup.State, open []OpenTxn, lastOffset int64) (*Writer, []Action) {
	t, err := newTxns(open)
	if err != nil {
		panic(fmt.Sprintf("partition machine: %v", err))
	}
	for _, o := range open {
		if o.First > lastOffset {
			panic(fmt.Sprintf("partition machine: open transaction %+v begins beyond the chain's end %d", o, lastOffset))
		}
	}
	m := &Writer{
		cfg: cfg, producers: producers, txns: t, phase: Replacing,
		maxEntry: min(cfg.MaxEntryBytes, MaxBatchBytes),
		next:     lastOffset + 1, lastSent: lastOffset, acked: lastOffset,
		byBase: make(map[int64]any), backoff: RetryMin,
	}
	m.out = m.out[:0]
	m.advance()
	return m, m.out
}

// Step applies one event and returns the actions to carry out, in order.
// The slice is valid until the next Step. Enqueue and Settle are the same
// steps for the two events of the append path, without boxing the event
// (Enqueue returns its verdict as a value rather than as the first action).
func (m *Writer) Step(ev Event) []Action {
	m.out = m.out[:0]
	switch e := ev.(type) {
	case Enqueue:
		m.out = append(m.out, nil)
		m.out[0] = m.enqueue(e).Action(e.Tag)
	case Mark:
		m.out = append(m.out, nil)
		m.out[0] = m.mark(e).Action(e.Tag)
	case Settled:
		m.settled(e)
	case LingerExpired:
		m.lingerArmed = false
		m.flush(e.Now, true)
	case Opened:
		m.opened(e)
	case OpenFailed:
		m.openFailed(e.Err)
	case SealDone:
		m.sealDone(e.Err)
	case Recovered:
		m.recovered(e)
	case RetryDue:
		if m.retryArmed {
			m.retryArmed = false
			m.advance()
		}
	case Close:
		m.close()
	case CloseTimedOut:
		m.closeTimedOut()
	case Released:
		m.released(e.Err)
	case Roll:
		if l := m.ledger; m.phase == Open && l != nil && l.gen == e.Gen && !l.failed {
			m.phase = Rolling
			m.advance()
		}
	default:
		panic(fmt.Sprintf("partition machine: unknown event %T", ev))
	}
	return m.out
}

// Current returns the ledger being written (its driver's handle and its
// generation, for Roll); ok is false in any other phase than Open.
func (m *Writer) Current() (handle any, gen int64, ok bool) {
	if l := m.ledger; m.phase == Open && l != nil && !l.failed {
		return l.handle, l.gen, true
	}
	return nil, 0, false
}

// Enqueue steps an Enqueue event; see Step.
func (m *Writer) Enqueue(e Enqueue) (Verdict, []Action) {
	m.out = m.out[:0]
	v := m.enqueue(e)
	return v, m.out
}

// Mark steps a Mark event, returning its verdict as Enqueue does.
func (m *Writer) Mark(e Mark) (Verdict, []Action) {
	m.out = m.out[:0]
	v := m.mark(e)
	return v, m.out
}

// Settle steps a Settled event; see Step.
func (m *Writer) Settle(e Settled) []Action {
	m.out = m.out[:0]
	m.settled(e)
	return m.out
}

func (m *Writer) emit(a Action) { m.out = append(m.out, a) }

// Phase is the writer's phase.
func (m *Writer) Phase() Phase { return m.phase }

// Err is why the writer stopped, or nil while it runs (and closes).
func (m *Writer) Err() error {
	if m.phase == Stopped || m.phase == Closed {
		return m.stoppedErr()
	}
	return nil
}

func (m *Writer) stoppedErr() error {
	if m.err != nil {
		return m.err
	}
	return ErrClosed
}

// NextOffset is the offset the next accepted batch gets (the partition's
// end as this writer sees it, acknowledged or not).
func (m *Writer) NextOffset() int64 { return m.next }

// AckedOffset is the durable end (see the field acked): the partition's
// high watermark minus one. It never decreases.
func (m *Writer) AckedOffset() int64 { return m.acked }

// Buffered is the bytes accepted and not yet settled.
func (m *Writer) Buffered() int64 { return m.buffered }

// StableOffset is the last stable offset as of the durable end: the first
// offset of the oldest transaction open there, else AckedOffset+1. It
// never decreases.
func (m *Writer) StableOffset() int64 { return m.txns.committedLSO(m.acked + 1) }

// OpenTxns is the number of transactions open (the queued view).
func (m *Writer) OpenTxns() int { return len(m.txns.queued) }

func (m *Writer) enqueue(e Enqueue) Verdict {
	if len(e.Batch) > MaxBatchBytes {
		return Verdict{Kind: KindRefused, Err: fmt.Errorf("%w: batch of %d bytes exceeds the entry limit %d", record.ErrInvalid, len(e.Batch), MaxBatchBytes)}
	}
	if v, ok := m.refuseInPhase(); !ok {
		return v
	}
	size := int64(len(e.Batch))
	if m.buffered+size > m.cfg.MaxBufferedBytes {
		return Verdict{Kind: KindNoSpace}
	}
	b := record.Batch(e.Batch)
	h := dedup.HeaderOf(b)
	d, err := m.producers.Check(h, e.Now)
	if err != nil {
		return Verdict{Kind: KindRefused, Err: err}
	}
	sabotaged := sabotageDedup && d.Kind != dedup.Append
	if sabotaged {
		d.Kind = dedup.Append // chaos sabotage build only: write the retry again
	}
	switch d.Kind {
	case dedup.Duplicate:
		return Verdict{Kind: KindDuplicate, Base: d.BaseOffset, Last: d.LastOffset}
	case dedup.DuplicateInFlight:
		orig, ok := m.byBase[d.BaseOffset]
		if !ok {
			return Verdict{Kind: KindRefused, Err: fmt.Errorf("%w: retry of a batch in flight at offset %d whose outcome is being decided", ErrUnavailable, d.BaseOffset)}
		}
		return Verdict{Kind: KindAttach, To: orig}
	}
	base := m.next
	record.SetBaseOffset(e.Batch, base)
	record.SetPartitionLeaderEpoch(e.Batch, int32(m.cfg.Epoch))
	last := b.LastOffset()
	m.next = b.NextOffset()
	m.buffered += size
	if h.ProducerID != dedup.NoProducerID && !sabotaged {
		m.producers.Pending(h, base, e.Now)
		m.byBase[base] = e.Tag
		if b.Attributes().Transactional() {
			m.txns.begin(h.ProducerID, h.Epoch, base)
		}
	}
	en := m.put(e.Batch, e.Tag, base, last)
	if h.ProducerID != dedup.NoProducerID && !sabotaged {
		en.idem = append(en.idem, base)
	}
	m.flush(e.Now, false)
	return Verdict{Kind: KindAccepted, Base: base, Last: last}
}

// refuseInPhase is the verdict on a batch or marker the phase does not
// take (ok false), or ok.
func (m *Writer) refuseInPhase() (Verdict, bool) {
	switch m.phase {
	case Stopped, Closed, Closing:
		err := m.err
		if err == nil {
			err = ErrClosed
		}
		return Verdict{Kind: KindRefused, Err: err}, false
	case Replacing:
		return Verdict{Kind: KindRefused, Err: fmt.Errorf("%w: %s/%d is replacing a failed ledger", ErrUnavailable, m.cfg.Topic, m.cfg.Partition)}, false
	}
	return Verdict{}, true
}

// put appends an accepted batch at base..last to the filling entry and
// returns the entry.
func (m *Writer) put(batch []byte, tag any, base, last int64) *entry {
	en := m.filling(len(batch), base)
	en.buf = append(en.buf, batch...)
	en.tags = append(en.tags, tag)
	en.last = last
	en.lso = m.txns.lso(last + 1)
	if en.size() >= m.maxEntry {
		en.sealed = true
	}
	return en
}

// mark decides a transaction marker: written like a batch (Accepted at its
// one offset) when it ends a transaction of this partition or fences the
// producer's older epochs; Duplicate (nothing written, offsets -1) when the
// producer already wrote at the marker's epoch or later here — the marker
// is a retry, or late: its transaction was complete before the producer
// could write at a newer epoch (the coordinator lets the next transaction
// begin only then), so it has nothing left to end.
func (m *Writer) mark(e Mark) Verdict {
	if v, ok := m.refuseInPhase(); !ok {
		return v
	}
	if o, ok := m.txns.open(e.ProducerID); ok && o.Epoch >= e.Epoch {
		return Verdict{Kind: KindDuplicate, Base: -1, Last: -1}
	}
	if ep, ok := m.producers.Epoch(e.ProducerID, e.Now); ok && ep >= e.Epoch {
		return Verdict{Kind: KindDuplicate, Base: -1, Last: -1}
	}
	if err := m.producers.CheckMarker(e.ProducerID, e.Epoch, e.Now); err != nil {
		return Verdict{Kind: KindRefused, Err: err}
	}
	batch, err := record.BuildMarker(record.Marker{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch, Commit: e.Commit, Timestamp: max(0, e.Now.UnixMilli())})
	if err != nil {
		return Verdict{Kind: KindRefused, Err: err}
	}
	size := int64(len(batch))
	if m.buffered+size > m.cfg.MaxBufferedBytes {
		return Verdict{Kind: KindNoSpace}
	}
	base := m.next
	record.SetBaseOffset(batch, base)
	record.SetPartitionLeaderEpoch(batch, int32(m.cfg.Epoch))
	m.next = base + 1
	m.buffered += size
	m.producers.PendingMarker(e.ProducerID, e.Epoch, base, e.Now)
	m.txns.end(e.ProducerID, base)
	m.put(batch, e.Tag, base, base)
	m.flush(e.Now, false)
	return Verdict{Kind: KindAccepted, Base: base, Last: base}
}

// filling returns the entry to put n more bytes in, starting at offset
// first: the last queued one if it is not sealed and has room, else a new
// one.
func (m *Writer) filling(n int, first int64) *entry {
	if k := len(m.queue); k > 0 {
		en := m.queue[k-1]
		if !en.sealed && en.size()+n <= m.maxEntry {
			return en
		}
		en.sealed = true
	}
	en := &entry{first: first, buf: make([]byte, record.EntryHeaderSize, record.EntryHeaderSize+n)}
	m.queue = append(m.queue, en)
	return en
}

// flush sends queued entries while the ledger is open and has room in
// flight. A filling entry goes at once unless Linger asks to wait (then
// LingerExpired sends it). Then it checks the roll rules.
func (m *Writer) flush(now time.Time, lingerExpired bool) {
	if m.phase != Open {
		return
	}
	l := m.ledger
	for len(m.queue) > 0 && len(m.inflight) < m.cfg.MaxInFlightEntries {
		en := m.queue[0]
		if !en.sealed && m.cfg.Linger > 0 && !lingerExpired {
			if !m.lingerArmed {
				m.lingerArmed = true
				m.emit(ArmLinger{m.cfg.Linger})
			}
			break
		}
		en.sealed = true
		m.queue[0] = nil
		m.queue = m.queue[1:]
		en.seq = l.seq
		l.seq++
		m.inflight = append(m.inflight, en)
		m.lastSent = en.last
		l.bytes += int64(en.size())
		m.emit(Send{Handle: l.handle, Gen: l.gen, Seq: en.seq, First: en.first, Last: en.last, Payload: en.payload(), Tags: en.tags})
	}
	if l.bytes >= m.cfg.RollBytes || now.Sub(l.born) >= m.cfg.RollAge {
		m.phase = Rolling
		m.advance()
	}
}

func (m *Writer) settled(e Settled) {
	l := m.ledger
	if l == nil || l.gen != e.Gen || l.failed || len(m.inflight) == 0 {
		return // an answer from a ledger given up: its batches were answered then
	}
	if e.Err != nil {
		m.failLedger(e.Err)
		return
	}
	en := m.inflight[0]
	if en.seq != e.Seq {
		// The ledger answers in entry order; an answer for another entry
		// is stale (or out of order, which the ledger never does).
		return
	}
	m.inflight[0] = nil
	m.inflight = m.inflight[1:]
	m.acked = en.last
	m.producers.Commit(en.last)
	m.txns.commit(en.last)
	m.emit(Acknowledge{en.tags})
	m.forget(en)
	m.free(int64(en.size()))
	switch m.phase {
	case Open:
		m.flush(e.Now, false)
	case Rolling, Closing:
		m.advance()
	}
}

// size is the bytes of en's batches.
func (en *entry) size() int { return len(en.buf) - record.EntryHeaderSize }

// payload is what en is written as: its batches, after an entry header when
// a transaction is open at its end.
func (en *entry) payload() []byte {
	if en.lso > en.last {
		return en.buf[record.EntryHeaderSize:]
	}
	record.PutEntryHeader(en.buf, en.lso)
	return en.buf
}

// forget drops en's batches from byBase.
func (m *Writer) forget(en *entry) {
	for _, base := range en.idem {
		delete(m.byBase, base)
	}
}

func (m *Writer) free(n int64) {
	if n == 0 {
		return
	}
	m.buffered -= n
	m.emit(SpaceFreed{})
}

// fail answers every batch of ens with err and releases their bytes.
func (m *Writer) fail(ens []*entry, err error) int {
	var n int64
	for _, en := range ens {
		for _, t := range en.tags {
			m.emit(Answer{Tag: t, Err: err})
		}
		n += int64(en.size())
	}
	m.free(n)
	return len(ens)
}

// failLedger gives up on the current ledger: every entry sent to it and not
// acknowledged, and every queued one, fails with an indeterminate outcome
// (some may survive the ledger's recovery; an idempotent producer's retry
// is then deduplicated). The failed batches stay pending in the producers'
// state: the recovery decides which were stored (Commit) and which not
// (Abort).
func (m *Writer) failLedger(cause error) {
	l := m.ledger
	fenced := errors.Is(cause, ErrFenced)
	err := fmt.Errorf("%w: ledger %d failed: %w", ErrUnavailable, l.id, cause)
	if fenced {
		err = fmt.Errorf("ledger %d: %w", l.id, cause) // cause wraps ErrFenced
	}
	ens := append(m.inflight, m.queue...)
	m.inflight, m.queue = nil, nil
	clear(m.byBase)
	n := m.fail(ens, err)
	m.emit(LedgerFailed{Handle: l.handle, Entries: n, Cause: cause, Fenced: fenced})
	l.failed = true
	if fenced {
		m.stop(err)
		return
	}
	if m.phase != Closing {
		m.phase = Replacing
	}
	m.advance()
}

// stop ends the writer for good: the lease is lost, or the ledger tier
// lost acknowledged records.
func (m *Writer) stop(err error) {
	m.fail(append(m.inflight, m.queue...), err)
	m.inflight, m.queue = nil, nil
	clear(m.byBase)
	closing := m.phase == Closing
	m.phase, m.err = Stopped, err
	m.retryArmed = false
	if closing && !m.finished {
		// The lease is gone: nothing to seal or release.
		m.finished = true
		m.emit(Finished{})
	}
}
