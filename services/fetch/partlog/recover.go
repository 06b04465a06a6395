package partlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// maxRecoveries bounds the retries of one read after Log.recover: each
// retry follows a change learned from the catalog (a trim, an offload, a
// rewritten object), and a chain rarely changes twice in one read.
const maxRecoveries = 3

// ledgerErr is a read error of one ledger of the chain: Log.recover learns
// from it which ledger to look at again.
type ledgerErr struct {
	id  catalog.LedgerID
	err error
}

func (e *ledgerErr) Error() string { return e.err.Error() }
func (e *ledgerErr) Unwrap() error { return e.err }

// gone reports whether err may mean the ledger moved rather than that the
// read failed: no replica had the entry (the bookies deleted an offloaded
// or trimmed ledger), its metadata is gone (deleted after a trim), or its
// object is gone (retention deleted it after the trim, or a key compaction
// rewrote it under a new key).
func gone(err error) bool {
	return errors.Is(err, ledger.ErrEntryUnavailable) || errors.Is(err, catalog.ErrNotFound) || errors.Is(err, ErrObjectMissing)
}

// withRecovery runs read, and after a failure of a ledger that may be gone
// asks recover whether a retry can succeed, at most maxRecoveries times.
// It returns read's last error, or recover's clearer one.
func (lg *Log) withRecovery(ctx context.Context, read func() error) error {
	for i := 0; ; i++ {
		err := read()
		var le *ledgerErr
		if err == nil || i == maxRecoveries || ctx.Err() != nil || !errors.As(err, &le) || !gone(le.err) {
			return err
		}
		retry, rerr := lg.recover(ctx, le.id, le.err)
		if !retry {
			if rerr != nil {
				return rerr
			}
			return err
		}
	}
}

// recover looks at a ledger whose read failed with a gone error: it
// re-reads the partition's chain (a ledger no longer in it was trimmed: the
// retry reads the new chain, which answers OUT_OF_RANGE below its start),
// then the ledger's metadata: an OFFLOADED ledger read from the bookies, or
// from an object that is no longer its Location, is switched to its
// current object. It reports whether a retry may succeed, or an error
// that says better than cause why not.
func (lg *Log) recover(ctx context.Context, id catalog.LedgerID, cause error) (retry bool, err error) {
	ls := lg.ls
	p, err := lg.chain(ctx, 0)
	if err != nil {
		return false, nil
	}
	lg.mu.Lock()
	st := lg.ledgers[id]
	lg.mu.Unlock()
	if st == nil || !inChain(p, id) {
		return true, nil // trimmed (or the chain moved on): read the new chain
	}
	before := st.metadata().Location
	m, err := st.refresh(ctx)
	if errors.Is(err, catalog.ErrNotFound) {
		lg.forget(id, st)
		return true, nil
	}
	if err != nil {
		return false, nil
	}
	switch {
	case m.State != catalog.LedgerOffloaded:
		return false, nil
	case ls.objects == nil:
		return false, fmt.Errorf("%w: ledger %d of %s/%d is offloaded to object %q, and the bookies no longer hold it: %w",
			ErrNoObjectStore, id, lg.key.topic, lg.key.partition, m.Location, cause)
	case st.object && m.Location != before:
		return true, nil // rewritten under a new key: the refresh pointed st at it
	case st.object && errors.Is(cause, ErrObjectMissing):
		return false, fmt.Errorf("ledger %d of %s/%d is OFFLOADED in the catalog at object %q, but the object store does not have it: %w",
			id, lg.key.topic, lg.key.partition, m.Location, cause)
	case st.object:
		return false, nil
	}
	ls.log.Info("reading an offloaded ledger from its object", slog.String("topic", lg.key.topic), slog.Int("partition", lg.key.partition),
		slog.Int64("ledger", int64(id)), slog.String("object", m.Location))
	lg.replace(st, &ledgerState{id: id, rd: st.rd, meta: m, object: true, bounds: make(map[int64]bounds)})
	return true, nil
}

func inChain(p catalog.Partition, id catalog.LedgerID) bool {
	for _, r := range p.Ledgers {
		if r.ID == id {
			return true
		}
	}
	return false
}

// replace puts next in place of old (if old is still the ledger's state).
// Readers holding old finish with it; the next read uses next.
func (lg *Log) replace(old, next *ledgerState) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.ledgers[old.id] == old {
		lg.ledgers[old.id] = next
	}
}

// forget drops a ledger's state so the next read opens it again.
func (lg *Log) forget(id catalog.LedgerID, old *ledgerState) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.ledgers[id] == old {
		delete(lg.ledgers, id)
	}
}

// sealStray closes a ledger that is not the tail of its chain but is still
// open (or was left in recovery): its writer moved on to the next ledger
// without sealing it, or died while a recovery ran. Readers cannot tell
// where such a ledger ends from its LAC (it may trail the acknowledged
// entries), so the read runs the ledger recovery itself, as a BookKeeper
// reader opening a ledger with recovery does: fence, find the last entry
// that reached Qa, close (compare-and-set; safe alongside any other
// recovery, and the next ledger proves no writer still appends here).
// Concurrent reads of the partition share one recovery.
func (lg *Log) sealStray(ctx context.Context, st *ledgerState) (catalog.LedgerMetadata, error) {
	lg.strayMu.Lock()
	defer lg.strayMu.Unlock()
	if m, err := st.refresh(ctx); err != nil || m.State.Sealed() {
		return m, err // another read sealed it meanwhile
	}
	lg.ls.log.Warn("partlog: a ledger before the tail of its partition is not sealed; recovering it",
		slog.String("topic", lg.key.topic), slog.Int("partition", lg.key.partition), slog.Int64("ledger", int64(st.id)))
	if _, err := lg.ls.lc.Recover(ctx, st.id, func(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }); err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("recover unsealed ledger %d: %w", st.id, err)
	}
	m, err := st.refresh(ctx)
	if err == nil && !m.State.Sealed() {
		err = fmt.Errorf("ledger %d still %v after its recovery", st.id, m.State)
	}
	return m, err
}
