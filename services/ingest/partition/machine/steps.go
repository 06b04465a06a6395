package machine

import (
	"errors"
	"fmt"
)

// advance starts the I/O step the phase needs next, unless one is under way
// or a retry is pending:
//   - Replacing: recover the failed ledger, then open the next one;
//   - Rolling: once the ledger drained, seal it, then open the next one;
//   - Closing: once the ledger drained, seal it, then release the lease.
func (m *Writer) advance() {
	if m.op != opNone || m.retryArmed {
		return
	}
	l := m.ledger
	switch m.phase {
	case Replacing:
		if l != nil {
			m.op = opRecover
			m.emit(RecoverLedger{l.handle})
			return
		}
		m.op = opOpen
		m.emit(OpenLedger{m.lastSent + 1})
	case Rolling:
		switch {
		case l == nil:
			m.op = opOpen
			m.emit(OpenLedger{m.lastSent + 1})
		case len(m.inflight) == 0:
			m.op = opSeal
			m.emit(SealLedger{l.handle, m.lastSent})
		}
	case Closing:
		switch {
		case l != nil && !l.failed && len(m.inflight) > 0:
			// Settle first.
		case l != nil && !l.failed:
			m.op = opSeal
			m.emit(SealLedger{l.handle, m.lastSent})
		default:
			// No ledger, or a failed one: the next owner recovers the
			// chain's tail anyway.
			m.op = opRelease
			m.emit(ReleaseLease{})
		}
	}
}

// done ends the I/O step o; false when o is not the step under way (an
// answer the machine no longer waits for) or the writer already stopped.
func (m *Writer) done(o op) bool {
	if m.op != o {
		return false
	}
	m.op = opNone
	return m.phase != Stopped && m.phase != Closed
}

// stepFailed handles a failed I/O step: fencing stops the writer; while
// closing the hand-over goes on without it; otherwise the step is retried
// after a backoff.
func (m *Writer) stepFailed(err error) {
	switch {
	case errors.Is(err, ErrFenced):
		m.stop(err)
	case m.phase == Closing:
		m.advance()
	default:
		m.retryArmed = true
		m.emit(RetryAfter{m.backoff})
		m.backoff = min(2*m.backoff, RetryMax)
	}
}

func (m *Writer) opened(e Opened) {
	if m.op == opOpen && (m.phase == Stopped || m.phase == Closed) {
		m.op = opNone
		m.emit(Discard{e.Handle, e.FirstOffset - 1})
		return
	}
	if !m.done(opOpen) {
		return
	}
	m.gen++
	m.ledger = &ledger{handle: e.Handle, id: e.ID, gen: m.gen, first: e.FirstOffset, born: e.Now}
	m.backoff = RetryMin
	if m.phase == Closing {
		m.advance() // seal the empty ledger, release
		return
	}
	m.phase = Open
	m.flush(e.Now, false)
}

func (m *Writer) openFailed(err error) {
	if m.done(opOpen) {
		m.stepFailed(err)
	}
}

func (m *Writer) sealDone(err error) {
	if !m.done(opSeal) {
		return
	}
	if err != nil {
		if m.phase == Closing && !errors.Is(err, ErrFenced) {
			m.finish(fmt.Errorf("seal ledger %d: %w", m.ledger.id, err))
			return
		}
		m.stepFailed(err)
		return
	}
	m.ledger = nil
	m.backoff = RetryMin
	m.advance() // Rolling: open the next; Closing: release
}

func (m *Writer) recovered(e Recovered) {
	if !m.done(opRecover) {
		return
	}
	if e.Err != nil {
		m.stepFailed(e.Err)
		return
	}
	if e.LastOffset < m.acked {
		m.stop(fmt.Errorf("%w: ledger %d recovered to offset %d, but offsets up to %d were acknowledged", ErrLostAcknowledged, m.ledger.id, e.LastOffset, m.acked))
		return
	}
	m.next, m.lastSent, m.acked = e.LastOffset+1, e.LastOffset, e.LastOffset
	// Batches up to the recovered end are stored; the rest never will be,
	// so their retries are new.
	m.producers.Commit(e.LastOffset)
	m.producers.Abort(e.LastOffset + 1)
	m.txns.commit(e.LastOffset)
	m.txns.abort(e.LastOffset + 1)
	m.ledger = nil
	m.backoff = RetryMin
	m.advance() // Replacing: open the next; Closing: release
}

func (m *Writer) released(err error) {
	if m.done(opRelease) {
		m.finish(err)
	}
}

func (m *Writer) close() {
	switch m.phase {
	case Stopped:
		// Nothing to hand over: the lease is gone. The writer is closed
		// from now on, like any other.
		m.finish(nil)
		return
	case Closing, Closed:
		return
	}
	m.phase = Closing
	m.retryArmed = false // a pending retry of a replacement or roll is moot
	for _, en := range m.queue {
		m.forget(en)
	}
	m.fail(m.queue, ErrClosed)
	m.queue = nil
	m.advance()
}

func (m *Writer) closeTimedOut() {
	if m.phase == Stopped || m.phase == Closed {
		return
	}
	err := fmt.Errorf("%w: %s/%d closed before the entry settled", ErrUnavailable, m.cfg.Topic, m.cfg.Partition)
	m.fail(append(m.inflight, m.queue...), err)
	m.inflight, m.queue = nil, nil
	clear(m.byBase)
	m.finish(fmt.Errorf("close %s/%d: timed out", m.cfg.Topic, m.cfg.Partition))
}

// finish ends Close: the writer is Closed, and Finished reports err.
func (m *Writer) finish(err error) {
	m.phase, m.err = Closed, ErrClosed
	m.retryArmed = false
	if !m.finished {
		m.finished = true
		m.emit(Finished{err})
	}
}
