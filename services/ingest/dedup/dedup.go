package dedup

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// Errors of Check (and of Rebuild, for bad fields). The service maps them to
// the client's codes; all but ErrInvalidSequence describe the producer's
// state, not the request's encoding.
var (
	// ErrProducerFenced: the batch's epoch is older than one this producer
	// id already wrote with — a zombie producer (Kafka PRODUCER_FENCED /
	// INVALID_PRODUCER_EPOCH). Fatal for that producer instance.
	ErrProducerFenced = errors.New("dedup: producer fenced by a newer epoch")
	// ErrOutOfOrderSequence: the batch is neither the next in sequence nor a
	// retry of one in the window: a gap, a retry older than the window, or a
	// new epoch not starting at 0 (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("dedup: out of order sequence")
	// ErrInvalidSequence: malformed producer fields — producer id below -1,
	// or an idempotent batch with a negative epoch or sequence, or fewer
	// than one record.
	ErrInvalidSequence = errors.New("dedup: invalid producer fields")
	// ErrUnknownProducer: no state for the producer (never seen here, or
	// evicted or expired) and the batch does not start at sequence 0
	// (Kafka UNKNOWN_PRODUCER_ID). The client starts over at sequence 0
	// with a new epoch or producer id.
	ErrUnknownProducer = errors.New("dedup: unknown producer id")
	// ErrTooManyInFlight: the producer already has WindowBatches batches in
	// flight here. Retriable once some settle.
	ErrTooManyInFlight = errors.New("dedup: too many batches in flight for this producer")
	// ErrTooManyProducers: a new producer needs a slot and all MaxProducers
	// tracked ones have batches in flight. Retriable.
	ErrTooManyProducers = errors.New("dedup: too many producers with batches in flight")
)

// NoProducerID marks a batch from a producer that is not idempotent; such
// batches bypass the State.
const NoProducerID = record.NoProducerID

// Header is what the State needs of a record batch.
type Header struct {
	ProducerID int64
	Epoch      int16
	FirstSeq   int32
	Count      int32 // records in the batch (offsets are dense: lastOffsetDelta = Count-1)
}

// HeaderOf reads h from a batch's header.
func HeaderOf(b record.Batch) Header {
	return Header{ProducerID: b.ProducerID(), Epoch: b.ProducerEpoch(), FirstSeq: b.BaseSequence(), Count: b.RecordCount()}
}

// LastSeq is the sequence of the batch's last record, wrapping after
// math.MaxInt32 to 0 as Kafka does. h must be valid.
func (h Header) LastSeq() int32 { return addSeq(h.FirstSeq, h.Count-1) }

func (h Header) validate() error {
	switch {
	case h.ProducerID < NoProducerID:
		return fmt.Errorf("%w: producer id %d", ErrInvalidSequence, h.ProducerID)
	case h.Epoch < 0:
		return fmt.Errorf("%w: producer %d: epoch %d", ErrInvalidSequence, h.ProducerID, h.Epoch)
	case h.FirstSeq < 0:
		return fmt.Errorf("%w: producer %d: base sequence %d", ErrInvalidSequence, h.ProducerID, h.FirstSeq)
	case h.Count < 1:
		return fmt.Errorf("%w: producer %d: record count %d", ErrInvalidSequence, h.ProducerID, h.Count)
	}
	return nil
}

// addSeq is s+n modulo 2^31, for s, n >= 0.
func addSeq(s, n int32) int32 { return int32((int64(s) + int64(n)) % (math.MaxInt32 + 1)) }

// Kind is what Check decided.
type Kind uint8

const (
	// Append: a new batch, in sequence: give it offsets and call Pending.
	Append Kind = iota + 1
	// Duplicate: a retry of a committed batch; answer with its offsets.
	Duplicate
	// DuplicateInFlight: a retry of a batch still pending; answer with that
	// batch's outcome (its BaseOffset identifies it).
	DuplicateInFlight
)

func (k Kind) String() string {
	switch k {
	case Append:
		return "append"
	case Duplicate:
		return "duplicate"
	case DuplicateInFlight:
		return "duplicate-in-flight"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Decision is Check's answer. BaseOffset and LastOffset are set for
// Duplicate and DuplicateInFlight: the original batch's offsets.
type Decision struct {
	Kind       Kind
	BaseOffset int64
	LastOffset int64
}

// batch is one batch of a producer as the State remembers it.
type batch struct {
	epoch         int16
	first, last   int32 // sequences
	base, lastOff int64 // offsets
}

// continues reports whether b is the next batch of prev's run: same epoch,
// first sequence right after prev's last.
func continues(prev, b batch) bool {
	return b.epoch == prev.epoch && b.first == addSeq(prev.last, 1)
}

// ring holds the last cap batches of a run, oldest first. It grows to cap
// and then overwrites the oldest.
type ring struct {
	buf  []batch
	head int // index of the oldest once len(buf) == cap
}

func (r *ring) len() int { return len(r.buf) }

// at returns the i-th batch, 0 being the oldest.
func (r *ring) at(i int) batch { return r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) newest() batch { return r.at(len(r.buf) - 1) }

func (r *ring) push(b batch, capacity int) {
	if len(r.buf) < capacity {
		r.buf = append(r.buf, b)
		return
	}
	r.buf[r.head] = b
	r.head = (r.head + 1) % capacity
}

// apply replays b on the run: it continues it, or starts a new one.
func (r *ring) apply(b batch, capacity int) {
	if len(r.buf) > 0 && !continues(r.newest(), b) {
		r.buf, r.head = r.buf[:0], 0
	}
	r.push(b, capacity)
}

// producer is one producer id's state.
//
// Invariants: committed is empty only while pending is not (a producer with
// neither is removed); pending is in offset order and each pending batch
// either continues the run before it or starts a new one at sequence 0;
// the producer is on the idle list exactly when pending is empty.
type producer struct {
	id int64
	// committed is the current run of committed batches (at most
	// WindowBatches, oldest first).
	committed ring
	// pending are the batches in flight (at most WindowBatches).
	pending []batch
	// lastSeen is the time of the last Pending or Rebuild.
	lastSeen time.Time
	// prev, next link the idle list (nil when not on it).
	prev, next *producer
}

// tip is the newest batch, pending or committed: the producer's epoch and
// next sequence follow from it.
func (p *producer) tip() batch {
	if n := len(p.pending); n > 0 {
		return p.pending[n-1]
	}
	return p.committed.newest()
}

// runStart is the index in pending where the tip's run starts, or -1 when
// the tip's run continues the committed one.
func (p *producer) runStart() int {
	start := -1
	prev, ok := batch{}, p.committed.len() > 0
	if ok {
		prev = p.committed.newest()
	}
	for i, b := range p.pending {
		if !ok || !continues(prev, b) {
			start = i
		}
		prev, ok = b, true
	}
	return start
}

// duplicate looks for the batch (first, last) of the tip's epoch among the
// last window batches of the tip's run.
func (p *producer) duplicate(first, last int32, window int) (Decision, bool) {
	start := p.runStart()
	seen := 0
	for i := len(p.pending) - 1; i >= max(start, 0) && seen < window; i-- {
		if b := p.pending[i]; b.first == first && b.last == last {
			return Decision{Kind: DuplicateInFlight, BaseOffset: b.base, LastOffset: b.lastOff}, true
		}
		seen++
	}
	if start >= 0 {
		return Decision{}, false
	}
	for i := p.committed.len() - 1; i >= 0 && seen < window; i-- {
		if b := p.committed.at(i); b.first == first && b.last == last {
			return Decision{Kind: Duplicate, BaseOffset: b.base, LastOffset: b.lastOff}, true
		}
		seen++
	}
	return Decision{}, false
}

// State is the idempotent-producer state of one partition. See the package
// documentation for the rules. Not safe for concurrent use.
type State struct {
	cfg       Config
	producers map[int64]*producer
	// idle is the sentinel of the list of producers with nothing in flight:
	// idle.next is the one idle for the shortest time, idle.prev the longest.
	idle  producer
	nIdle int
	// queue is the owner of every pending batch, in offset order.
	queue []*producer
	// committedEnd: every offset below it is committed (Abort may not reach
	// it). end: Pending and Rebuild need a base offset at or after it; it is
	// max(committedEnd, last pending offset + 1).
	committedEnd int64
	end          int64
}

// New returns an empty State (a partition never written, or one to Rebuild).
func New(cfg Config) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &State{cfg: cfg.withDefaults(), producers: make(map[int64]*producer)}
	s.idle.next, s.idle.prev = &s.idle, &s.idle
	return s, nil
}

// Config is the State's configuration, defaults filled in.
func (s *State) Config() Config { return s.cfg }

// Producers is the number of producer ids tracked (expired ones included
// until they are dropped).
func (s *State) Producers() int { return len(s.producers) }

// InFlight is the number of pending batches.
func (s *State) InFlight() int { return len(s.queue) }

// CommittedEnd is the offset below which every offset is committed
// (Commit, Rebuild); it only rises.
func (s *State) CommittedEnd() int64 { return s.committedEnd }

func (s *State) expired(p *producer, now time.Time) bool {
	return len(p.pending) == 0 && now.Sub(p.lastSeen) >= s.cfg.ProducerExpiry
}

// lookup returns the producer's state, or nil if it is unknown (absent or
// expired).
func (s *State) lookup(id int64, now time.Time) *producer {
	p := s.producers[id]
	if p == nil || s.expired(p, now) {
		return nil
	}
	return p
}

// Epoch is the producer's current epoch here (of its newest batch or
// marker, pending or committed), and false when the producer is not
// tracked (never seen, evicted or expired).
func (s *State) Epoch(id int64, now time.Time) (int16, bool) {
	p := s.lookup(id, now)
	if p == nil {
		return 0, false
	}
	return p.tip().epoch, true
}

// Check decides what to do with a batch with header h arriving at now. It
// changes nothing. See the package documentation for the rules.
func (s *State) Check(h Header, now time.Time) (Decision, error) {
	if h.ProducerID == NoProducerID {
		return Decision{Kind: Append}, nil
	}
	if err := h.validate(); err != nil {
		return Decision{}, err
	}
	p := s.lookup(h.ProducerID, now)
	if p == nil {
		if h.FirstSeq != 0 {
			return Decision{}, fmt.Errorf("%w: producer %d epoch %d: sequence %d (a new producer starts at 0)", ErrUnknownProducer, h.ProducerID, h.Epoch, h.FirstSeq)
		}
		if len(s.producers) >= s.cfg.MaxProducers && s.nIdle == 0 {
			return Decision{}, fmt.Errorf("%w: producer %d: %d tracked", ErrTooManyProducers, h.ProducerID, len(s.producers))
		}
		return Decision{Kind: Append}, nil
	}
	tip := p.tip()
	switch {
	case h.Epoch < tip.epoch:
		return Decision{}, fmt.Errorf("%w: producer %d: epoch %d, current %d", ErrProducerFenced, h.ProducerID, h.Epoch, tip.epoch)
	case h.Epoch > tip.epoch:
		if h.FirstSeq != 0 {
			return Decision{}, fmt.Errorf("%w: producer %d: new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.Epoch, h.FirstSeq)
		}
	default:
		if d, ok := p.duplicate(h.FirstSeq, h.LastSeq(), s.cfg.WindowBatches); ok {
			return d, nil
		}
		if want := addSeq(tip.last, 1); h.FirstSeq != want {
			return Decision{}, fmt.Errorf("%w: producer %d epoch %d: sequence %d, expected %d", ErrOutOfOrderSequence, h.ProducerID, h.Epoch, h.FirstSeq, want)
		}
	}
	if len(p.pending) >= s.cfg.WindowBatches {
		return Decision{}, fmt.Errorf("%w: producer %d: %d pending", ErrTooManyInFlight, h.ProducerID, len(p.pending))
	}
	return Decision{Kind: Append}, nil
}

// Pending records that the batch with header h got offsets baseOffset ..
// baseOffset+Count-1 at now and is in flight. Check(h, now) must answer
// Append right before, with nothing in between, and baseOffset must follow
// every offset Pending or Rebuild saw (after Abort, the aborted offsets are
// free again); Pending panics otherwise. Batches with NoProducerID are
// ignored.
func (s *State) Pending(h Header, baseOffset int64, now time.Time) {
	if h.ProducerID == NoProducerID {
		return
	}
	if baseOffset < s.end {
		panic(fmt.Sprintf("dedup: Pending at offset %d before offset %d", baseOffset, s.end))
	}
	if d, err := s.Check(h, now); err != nil || d.Kind != Append {
		panic(fmt.Sprintf("dedup: Pending of a batch Check does not append: %+v: %v %v", h, d.Kind, err))
	}
	s.pend(h.ProducerID, batch{epoch: h.Epoch, first: h.FirstSeq, last: h.LastSeq(), base: baseOffset, lastOff: baseOffset + int64(h.Count) - 1}, now)
}

// pend records b of producer id as pending (the checks are the caller's).
func (s *State) pend(id int64, b batch, now time.Time) {
	s.sweep(now)
	p := s.producers[id]
	if p != nil && s.expired(p, now) {
		s.remove(p)
		p = nil
	}
	if p == nil {
		p = s.add(id)
	} else if len(p.pending) == 0 {
		s.unlink(p)
	}
	p.pending = append(p.pending, b)
	p.lastSeen = now
	s.queue = append(s.queue, p)
	s.end = b.lastOff + 1
}

// A transaction marker (issue 24) is remembered as a batch of its producer
// at the marker's epoch, one offset long, that takes no sequence. It starts
// a new run: at an epoch above the producer's (the coordinator bumps it at
// every EndTxn) the next batch must be at that epoch from sequence 0, and a
// batch at an earlier epoch — a late write of the transaction the marker
// ended — is fenced. A marker at the producer's own epoch changes nothing
// (the sequence goes on), so it is not remembered. A marker for a producer
// not tracked starts tracking it, so the fence holds. Markers are committed
// and aborted like batches.

// CheckMarker decides a marker of producer id at epoch arriving at now:
// ErrProducerFenced below the producer's epoch, ErrTooManyInFlight and
// ErrTooManyProducers as for a batch. It changes nothing.
func (s *State) CheckMarker(id int64, epoch int16, now time.Time) error {
	if id < 0 || epoch < 0 {
		return fmt.Errorf("%w: marker of producer %d epoch %d", ErrInvalidSequence, id, epoch)
	}
	p := s.lookup(id, now)
	if p == nil {
		if len(s.producers) >= s.cfg.MaxProducers && s.nIdle == 0 {
			return fmt.Errorf("%w: producer %d: %d tracked", ErrTooManyProducers, id, len(s.producers))
		}
		return nil
	}
	if tip := p.tip(); epoch < tip.epoch {
		return fmt.Errorf("%w: marker of producer %d: epoch %d, current %d", ErrProducerFenced, id, epoch, tip.epoch)
	}
	if len(p.pending) >= s.cfg.WindowBatches {
		return fmt.Errorf("%w: producer %d: %d pending", ErrTooManyInFlight, id, len(p.pending))
	}
	return nil
}

// PendingMarker records that a marker of producer id at epoch got offset
// baseOffset at now and is in flight. CheckMarker must accept it right
// before; the offset rules are Pending's. It panics otherwise.
func (s *State) PendingMarker(id int64, epoch int16, baseOffset int64, now time.Time) {
	if baseOffset < s.end {
		panic(fmt.Sprintf("dedup: PendingMarker at offset %d before offset %d", baseOffset, s.end))
	}
	if err := s.CheckMarker(id, epoch, now); err != nil {
		panic(fmt.Sprintf("dedup: PendingMarker of a marker CheckMarker refuses: producer %d epoch %d: %v", id, epoch, err))
	}
	if p := s.lookup(id, now); p != nil && p.tip().epoch == epoch {
		return // at the producer's own epoch a marker changes nothing here
	}
	s.pend(id, batch{epoch: epoch, first: -1, last: -1, base: baseOffset, lastOff: baseOffset}, now)
}

// Commit records that every offset up to and including through is
// acknowledged: pending batches ending at or before it are committed, in
// offset order. It panics if through falls inside a pending batch.
func (s *State) Commit(through int64) {
	for len(s.queue) > 0 {
		p := s.queue[0]
		b := p.pending[0]
		if b.base > through {
			break
		}
		if b.lastOff > through {
			panic(fmt.Sprintf("dedup: Commit through offset %d inside pending batch [%d, %d]", through, b.base, b.lastOff))
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		p.pending = p.pending[:copy(p.pending, p.pending[1:])]
		p.committed.apply(b, s.cfg.WindowBatches)
		if len(p.pending) == 0 {
			s.pushIdle(p)
		}
	}
	if through < math.MaxInt64 && through+1 > s.committedEnd {
		s.committedEnd = through + 1
	}
	s.end = max(s.end, s.committedEnd)
}

// Abort records that no batch at offset from or after is stored: those
// pending batches are dropped as if never Pending, and each affected
// producer rolls back to its state before its earliest aborted batch. The
// writer must fail all of them, and the retries attached to them. It panics
// if from falls inside a pending batch or at or below a committed offset.
func (s *State) Abort(from int64) {
	if from < s.committedEnd {
		panic(fmt.Sprintf("dedup: Abort from offset %d, but offsets below %d are committed", from, s.committedEnd))
	}
	for n := len(s.queue); n > 0; n = len(s.queue) {
		p := s.queue[n-1]
		b := p.pending[len(p.pending)-1]
		if b.lastOff < from {
			break
		}
		if b.base < from {
			panic(fmt.Sprintf("dedup: Abort from offset %d inside pending batch [%d, %d]", from, b.base, b.lastOff))
		}
		s.queue[n-1] = nil
		s.queue = s.queue[:n-1]
		p.pending = p.pending[:len(p.pending)-1]
		if len(p.pending) == 0 {
			if p.committed.len() == 0 {
				delete(s.producers, p.id)
			} else {
				s.pushIdle(p)
			}
		}
	}
	s.end = s.committedEnd
	if n := len(s.queue); n > 0 {
		s.end = max(s.end, s.queue[n-1].tip().lastOff+1)
	}
}

// Rebuild replays one acknowledged batch read back from the log, stored at
// baseOffset and appended at seen (its max timestamp, or the time of the
// read if unknown; it starts the producer's expiry clock). Feed batches in
// offset order, before any Pending; see the package documentation for how
// far back to read. Batches with NoProducerID are skipped. The log is
// trusted — no sequence or epoch rule is applied — but malformed fields
// (ErrInvalidSequence) or offsets out of order are errors: the data is
// corrupt. Rebuild panics if batches are pending.
func (s *State) Rebuild(h Header, baseOffset int64, seen time.Time) error {
	if len(s.queue) > 0 {
		panic("dedup: Rebuild with batches pending")
	}
	if h.ProducerID == NoProducerID {
		return nil
	}
	if err := h.validate(); err != nil {
		return fmt.Errorf("rebuild batch at offset %d: %w", baseOffset, err)
	}
	if baseOffset < s.end {
		return fmt.Errorf("rebuild batch at offset %d: out of order, after offset %d", baseOffset, s.end-1)
	}
	p := s.producers[h.ProducerID]
	if p == nil {
		p = s.add(h.ProducerID)
	} else {
		s.unlink(p)
	}
	b := batch{epoch: h.Epoch, first: h.FirstSeq, last: h.LastSeq(), base: baseOffset, lastOff: baseOffset + int64(h.Count) - 1}
	p.committed.apply(b, s.cfg.WindowBatches)
	p.lastSeen = seen
	s.pushIdle(p)
	s.committedEnd = b.lastOff + 1
	s.end = s.committedEnd
	return nil
}

// RebuildMarker replays an acknowledged marker read back from the log, as
// Rebuild does a batch.
func (s *State) RebuildMarker(id int64, epoch int16, baseOffset int64, seen time.Time) error {
	if len(s.queue) > 0 {
		panic("dedup: RebuildMarker with batches pending")
	}
	if id < 0 || epoch < 0 {
		return fmt.Errorf("rebuild marker at offset %d: %w: producer %d epoch %d", baseOffset, ErrInvalidSequence, id, epoch)
	}
	if baseOffset < s.end {
		return fmt.Errorf("rebuild marker at offset %d: out of order, after offset %d", baseOffset, s.end-1)
	}
	p := s.producers[id]
	if p != nil && p.tip().epoch == epoch {
		return nil // at the producer's own epoch a marker changes nothing here
	}
	if p == nil {
		p = s.add(id)
	} else {
		s.unlink(p)
	}
	p.committed.apply(batch{epoch: epoch, first: -1, last: -1, base: baseOffset, lastOff: baseOffset}, s.cfg.WindowBatches)
	p.lastSeen = seen
	s.pushIdle(p)
	s.committedEnd = baseOffset + 1
	s.end = s.committedEnd
	return nil
}

// add creates producer id's state, evicting the producer idle longest if
// MaxProducers are tracked. The caller makes sure one is idle (Check's
// ErrTooManyProducers).
func (s *State) add(id int64) *producer {
	if len(s.producers) >= s.cfg.MaxProducers {
		if s.nIdle == 0 {
			panic("dedup: no producer to evict")
		}
		s.remove(s.idle.prev)
	}
	p := &producer{id: id}
	s.producers[id] = p
	return p
}

// sweep drops expired producers from the idle end of the list.
func (s *State) sweep(now time.Time) {
	for p := s.idle.prev; p != &s.idle && s.expired(p, now); p = s.idle.prev {
		s.remove(p)
	}
}

// remove forgets an idle producer.
func (s *State) remove(p *producer) {
	s.unlink(p)
	delete(s.producers, p.id)
}

func (s *State) pushIdle(p *producer) {
	p.prev, p.next = &s.idle, s.idle.next
	s.idle.next.prev = p
	s.idle.next = p
	s.nIdle++
}

func (s *State) unlink(p *producer) {
	if p.next == nil {
		return
	}
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
	s.nIdle--
}
