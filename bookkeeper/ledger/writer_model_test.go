package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// TestWriterAgainstModel drives a Writer with random events — acks and
// failures in any order, duplicates, stray acks, ensemble changes that
// succeed or fail, fences, ticks, close — and checks every step against a
// naive model of what BookKeeper promises:
//
//   - acknowledgements are exactly 0, 1, 2, … each once, in order;
//   - an acknowledged entry was stored (acked) by Qa bookies of its write
//     set in the segment that, in the writer's final ensembles, holds it;
//   - no message carries an LAC beyond the last acknowledged entry;
//   - at most MaxInFlight entries are unacknowledged;
//   - nothing is acknowledged after the writer stopped or closed;
//   - CloseLedger carries the last acknowledged entry;
//   - with no more faults, every pending entry ends up acknowledged.
func TestWriterAgainstModel(t *testing.T) {
	f := func(seed uint64) bool {
		if err := runWriterModel(seed); err != nil {
			t.Errorf("seed %d: %v", seed, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 500}); err != nil {
		t.Fatal(err)
	}
}

type writerModel struct {
	w        *Writer
	rep      catalog.Replication
	lastAck  int64
	stopped  bool
	closed   bool
	sends    []SendAdd // sent and not yet answered
	everSent map[AddAcked]bool
	stored   map[int64][]string
	change   *EnsembleChangeNeeded
	spare    int
	maxInFly int
}

func runWriterModel(seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 7))
	e := 1 + r.IntN(5)
	qw := 1 + r.IntN(e)
	qa := 1 + r.IntN(qw)
	rep := catalog.Replication{Ensemble: e, WriteQuorum: qw, AckQuorum: qa}
	var bookies []string
	for i := range e {
		bookies = append(bookies, fmt.Sprintf("b%d", i))
	}
	cfg := Config{Replication: rep, MaxInFlight: 1 + r.IntN(6), MaxEnsembleChanges: 1 + r.IntN(8)}
	w, err := NewWriter(cfg, bookies)
	if err != nil {
		return err
	}
	m := &writerModel{w: w, rep: rep, lastAck: -1, stored: map[int64][]string{}, everSent: map[AddAcked]bool{}, spare: e, maxInFly: cfg.MaxInFlight}
	payload := func(entry int64) []byte { return fmt.Appendf(nil, "p%d", entry) }

	steps := 50 + r.IntN(300)
	for i := 0; i < steps; i++ {
		var ev Event
		switch k := r.IntN(100); {
		case k < 25:
			ev = Append{Payload: payload(w.NextEntry())}
		case k < 60 && len(m.sends) > 0:
			j := r.IntN(len(m.sends))
			s := m.sends[j]
			if r.IntN(10) > 0 { // keep duplicates possible
				m.sends = slices.Delete(m.sends, j, j+1)
			}
			m.stored[s.Entry] = append(m.stored[s.Entry], s.Bookie)
			ev = AddAcked{Bookie: s.Bookie, Entry: s.Entry}
		case k < 65:
			// A stray ack: a fact only if that add was ever sent, else it
			// must count for nothing.
			a := AddAcked{Bookie: fmt.Sprintf("b%d", r.IntN(e+3)), Entry: int64(r.IntN(int(w.NextEntry()) + 2))}
			if m.everSent[a] {
				m.stored[a.Entry] = append(m.stored[a.Entry], a.Bookie)
			}
			ev = a
		case k < 70 && len(m.sends) > 0:
			j := r.IntN(len(m.sends))
			s := m.sends[j]
			m.sends = slices.Delete(m.sends, j, j+1)
			ev = AddFailed{Bookie: s.Bookie, Entry: s.Entry, Reason: FailUnavailable}
		case k < 80 && m.change != nil:
			ev = m.answerChange(r.IntN(4) == 0)
		case k < 88:
			ev = Tick{}
		case k < 89:
			ev = AddFailed{Bookie: bookies[0], Entry: 0, Reason: FailFenced}
		case k < 91:
			ev = Close{}
		default:
			continue
		}
		if err := m.step(ev); err != nil {
			return fmt.Errorf("step %d (%v): %w", i, ev, err)
		}
	}
	// Faults stop: answer everything until quiet.
	for round := 0; round < 10000 && !m.stopped && (w.Pending() > 0 || m.change != nil); round++ {
		var ev Event
		switch {
		case m.change != nil:
			ev = m.answerChange(false)
		case len(m.sends) > 0:
			s := m.sends[0]
			m.sends = m.sends[1:]
			m.stored[s.Entry] = append(m.stored[s.Entry], s.Bookie)
			ev = AddAcked{Bookie: s.Bookie, Entry: s.Entry}
		default:
			ev = Tick{}
		}
		if err := m.step(ev); err != nil {
			return fmt.Errorf("settling (%v): %w", ev, err)
		}
	}
	if !m.stopped && w.Pending() > 0 {
		return fmt.Errorf("%d entries still pending after faults stopped", w.Pending())
	}
	return m.checkAcknowledged()
}

func (m *writerModel) answerChange(fail bool) Event {
	c := m.change
	m.change = nil
	if fail {
		return EnsembleChangeFailed{Err: errors.New("no spare")}
	}
	ens := slices.Clone(c.Ensemble)
	for i, b := range ens {
		if slices.Contains(c.Failed, b) {
			ens[i] = fmt.Sprintf("b%d", m.spare)
			m.spare++
		}
	}
	return BookieReplaced{FirstEntry: c.FromEntry, Ensemble: ens}
}

func (m *writerModel) step(ev Event) error {
	acts, err := m.w.Step(ev)
	if _, ok := ev.(Append); ok && err != nil {
		if !errors.Is(err, ErrInFlightLimit) && !errors.Is(err, ErrClosed) && !m.stopped {
			return fmt.Errorf("append refused: %w", err)
		}
		if errors.Is(err, ErrInFlightLimit) && m.w.Pending() < m.maxInFly {
			return fmt.Errorf("in-flight limit with %d pending", m.w.Pending())
		}
	} else if err != nil && !(m.stopped && errors.Is(err, m.w.Err())) {
		return err
	}
	for _, a := range acts {
		switch a := a.(type) {
		case SendAdd:
			if a.LAC > m.lastAck {
				return fmt.Errorf("%v carries an LAC beyond the last acknowledged entry %d", a, m.lastAck)
			}
			m.sends = append(m.sends, a)
			m.everSent[AddAcked{Bookie: a.Bookie, Entry: a.Entry}] = true
		case SendWriteLac:
			if a.LAC > m.lastAck {
				return fmt.Errorf("%v beyond the last acknowledged entry %d", a, m.lastAck)
			}
		case Acknowledge:
			if m.stopped || m.closed {
				return fmt.Errorf("%v after the writer stopped or closed", a)
			}
			if a.Entry != m.lastAck+1 {
				return fmt.Errorf("%v out of order: last was %d", a, m.lastAck)
			}
			m.lastAck = a.Entry
		case EnsembleChangeNeeded:
			if m.change != nil {
				return fmt.Errorf("%v while another change is in flight", a)
			}
			if a.FromEntry != m.lastAck+1 {
				return fmt.Errorf("%v: want from LAC+1 = %d", a, m.lastAck+1)
			}
			c := a
			m.change = &c
		case Stopped:
			m.stopped = true
			m.change = nil
		case CloseLedger:
			if a.LastEntry != m.lastAck {
				return fmt.Errorf("%v: last acknowledged is %d", a, m.lastAck)
			}
			m.closed = true
		}
	}
	if m.w.Pending() > m.maxInFly {
		return fmt.Errorf("%d pending, limit %d", m.w.Pending(), m.maxInFly)
	}
	if m.w.LAC() != m.lastAck {
		return fmt.Errorf("LAC() = %d, acknowledged up to %d", m.w.LAC(), m.lastAck)
	}
	return nil
}

// checkAcknowledged: each acknowledged entry is stored on Qa bookies of its
// write set in the segment that holds it.
func (m *writerModel) checkAcknowledged() error {
	segs := m.w.Segments()
	for entry := int64(0); entry <= m.lastAck; entry++ {
		k := len(segs) - 1
		for segs[k].FirstEntry > entry {
			k--
		}
		n := 0
		for _, i := range naiveWriteSet(m.rep.Ensemble, m.rep.WriteQuorum, entry) {
			if slices.Contains(m.stored[entry], segs[k].Bookies[i]) {
				n++
			}
		}
		if n < m.rep.AckQuorum {
			return fmt.Errorf("entry %d acknowledged but only %d bookies of its write set in %v stored it (stored: %v)", entry, n, segs[k], m.stored[entry])
		}
	}
	return nil
}
