package partlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// Result is what one Read returns.
type Result struct {
	// Records in offset order, at or after the requested offset. Their
	// byte slices are shared with the entry cache: read-only.
	Records []record.Record
	// Batches, with Limits.Batches: stored record batches in offset order,
	// each element one or more whole batches back to back, shared with the
	// entry cache (read-only). The first may start before the requested
	// offset. A Result holds Records or Batches, never both: a first batch
	// that cannot fit the hard limits comes as Records.
	Batches [][]byte
	// Count is the number of Records, or the offsets the Batches cover from
	// the requested offset on (at least the records they hold there): what
	// a delivery spends of record credits.
	Count int
	// Bytes is the size of the records (keys, values, header keys and
	// values), or of the Batches as stored.
	Bytes         int
	HighWatermark int64
	// StableEnd is the last stable offset (LSO) on a ReadCommitted read:
	// the first offset of the oldest transaction open, at most
	// HighWatermark; 0 on other reads.
	StableEnd int64
	LogStart  int64
	// Next is the offset to read next.
	Next int64
}

// Limits bounds one Read.
type Limits struct {
	MaxRecords int
	MaxBytes   int // at least one record is returned even if larger...
	// HardMaxBytes, when set, bounds that first record too (credits: never
	// send beyond them). A first record larger than it is not returned.
	HardMaxBytes int
	// Batches returns whole stored batches (Result.Batches) instead of
	// decoded records. MaxRecords and MaxBytes then stop the read before a
	// batch that would cross them, except the first. The first batch must
	// fit HardMaxRecords (MaxRecords when 0) and HardMaxBytes (when set);
	// one that does not is decoded and returned as Records within the
	// limits, and the read stops there.
	Batches        bool
	HardMaxRecords int
	// ReadCommitted reads only records of committed transactions (and
	// records written outside transactions): it stops at the last stable
	// offset and skips aborted transactions' batches (txn.go).
	ReadCommitted bool

	// control: with Batches, the scan for transaction markers: return the
	// control batches only (verified), passing over the others (counted
	// against the limits). txn: set by a read_committed read.
	control bool
	txn     *txnFilter
}

// Read returns records of a partition from offset on, within lim. At the
// end of the log it returns no records (use Wait to wait for more).
func (ls *Logs) Read(ctx context.Context, topic string, partition int, offset int64, lim Limits) (Result, error) {
	lg := ls.get(topic, partition)
	lg.touch()
	read := lg.read
	if lim.ReadCommitted {
		read = lg.readCommitted
	}
	res, beyond, err := read(ctx, offset, lim, readCached)
	// At the end as known — or, reading committed records, held at the
	// LSO as known, which a fresh look at the tail may move.
	atEnd := func() bool {
		return res.Count == 0 && (res.HighWatermark <= offset || lim.ReadCommitted && res.Next <= offset && res.StableEnd <= offset)
	}
	if err == nil && atEnd() {
		lg.mu.Lock()
		watched := lg.watching
		lg.mu.Unlock()
		switch {
		case beyond:
			// Past the end as known: re-read the chain (a roll-over may
			// have added a ledger) and the LAC before answering
			// OUT_OF_RANGE. The writer pushes its LAC right after an
			// acknowledgement, so an offset a producer was just given
			// becomes readable within milliseconds: give it that long.
			for _, d := range freshRetries {
				if d > 0 {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
						return Result{}, ctx.Err()
					}
				}
				res, _, err = read(ctx, offset, lim, readFresh)
				var oor *OutOfRangeError
				if !errors.As(err, &oor) || oor.BelowLogStart {
					break
				}
			}
		case !watched:
			// At the end with no tail watcher keeping the LAC fresh: ask
			// the bookies once, so a fetch without wait sees what was
			// just acknowledged.
			res, _, err = read(ctx, offset, lim, readPoll)
		}
	}
	if err != nil {
		return Result{}, err
	}
	lg.raise(res.HighWatermark)
	return res, nil
}

// freshRetries are the delays between the fresh re-reads (the chain and
// the LAC) that precede an answer that an offset is past the end: about
// 75 ms in all, the time an offset a producer was just given takes to
// become readable.
var freshRetries = []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}

// readMode says what a read may take stale.
type readMode uint8

const (
	readCached readMode = iota // the chain up to ChainTTL old, the LAC as known
	readPoll                   // ... and the tail's LAC asked of the bookies
	readFresh                  // the chain re-read and the LAC asked; beyond the end is OUT_OF_RANGE
)

// read reads from offset. beyond reports an offset past the end as known
// (an error only in readFresh mode). A read that fails because a ledger is
// gone is retried after Log.recover.
func (lg *Log) read(ctx context.Context, offset int64, lim Limits, mode readMode) (res Result, beyond bool, err error) {
	err = lg.withRecovery(ctx, func() error {
		res, beyond, err = lg.readOnce(ctx, offset, lim, mode)
		return err
	})
	return res, beyond, err
}

func (lg *Log) readOnce(ctx context.Context, offset int64, lim Limits, mode readMode) (res Result, beyond bool, err error) {
	ls := lg.ls
	var p catalog.Partition
	if mode == readFresh {
		p, err = lg.chain(ctx, 0)
	} else {
		p, err = lg.chainCached(ctx)
	}
	if err != nil {
		return Result{}, false, err
	}
	res = Result{LogStart: p.LogStartOffset, Next: offset}
	// stable: a read_committed read learns the LSO right before it
	// collects (after the tail's LAC was polled, in the modes that poll),
	// and reports it however it ends.
	stableKnown := false
	stable := func() error {
		if lim.txn == nil || stableKnown {
			return nil
		}
		s, err := lg.stableOf(ctx, p)
		if err != nil {
			return err
		}
		lim.txn.stable, stableKnown = s, true
		return nil
	}
	if lim.txn != nil {
		defer func() {
			if err == nil && stable() == nil {
				res.StableEnd = min(lim.txn.stable, res.HighWatermark)
			}
		}()
	}
	outOfRange := func(end int64) error {
		return &OutOfRangeError{Offset: offset, Start: p.LogStartOffset, End: end, Topic: lg.key.topic, Partition: lg.key.partition, BelowLogStart: offset < p.LogStartOffset}
	}
	if len(p.Ledgers) == 0 && mode == readPoll {
		// At the end of a partition with no ledger as cached: its first
		// ledger may have been created since, its records acknowledged
		// (the chain is cached up to ChainTTL). Ask the catalog.
		// The catalog failing leaves the answer as cached (empty), as
		// before this read asked.
		if q, err := lg.chain(ctx, 0); err == nil {
			p = q
			res.LogStart = p.LogStartOffset
		}
	}
	if len(p.Ledgers) == 0 {
		res.HighWatermark = p.LogStartOffset
		switch {
		case offset == p.LogStartOffset:
			return res, false, nil
		case offset > p.LogStartOffset && mode != readFresh:
			return res, true, nil
		}
		return res, false, outOfRange(p.LogStartOffset)
	}
	if offset < p.LogStartOffset || offset < p.Ledgers[0].FirstOffset {
		end, err := lg.hwOf(ctx, p)
		if err != nil {
			return res, false, err
		}
		return res, false, outOfRange(end)
	}
	if mode != readCached {
		if p, err = lg.pollTail(ctx, p, mode); err != nil {
			return res, false, err
		}
	}
	for i := locate(p.Ledgers, offset); i < len(p.Ledgers); i++ {
		ref := p.Ledgers[i]
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return res, false, &ledgerErr{ref.ID, err}
		}
		last, sealed := st.readable()
		if i < len(p.Ledgers)-1 && !sealed {
			// A ledger followed by another is sealed: learn it.
			m, err := st.refresh(ctx)
			if err == nil && !m.State.Sealed() {
				m, err = lg.sealStray(ctx, st)
			}
			if err != nil {
				return res, false, &ledgerErr{ref.ID, err}
			}
			last, sealed = m.LastEntry, true
		}
		m := st.metadata()
		if sealed && offset > m.LastOffset {
			continue
		}
		if err := stable(); err != nil {
			return res, false, err
		}
		if st.object {
			if err := lg.collectObject(ctx, st, offset, lim, &res); err != nil {
				return res, false, &ledgerErr{ref.ID, err}
			}
			if i == len(p.Ledgers)-1 {
				res.HighWatermark = m.LastOffset + 1
			} else if res.HighWatermark, err = lg.hwOf(ctx, p); err != nil {
				return res, false, err
			}
			return res, false, nil
		}
		if last < 0 {
			break // an open ledger with nothing readable yet
		}
		lastBounds, err := ls.entryBounds(ctx, st, last)
		if err != nil {
			return res, false, &ledgerErr{ref.ID, err}
		}
		if offset > lastBounds.last {
			break // beyond the readable end of the open tail
		}
		e, err := lg.entryFor(ctx, st, offset, last)
		if err != nil {
			return res, false, &ledgerErr{ref.ID, err}
		}
		if err := lg.collect(ctx, st, e, last, offset, lim, &res); err != nil {
			return res, false, &ledgerErr{ref.ID, err}
		}
		if i == len(p.Ledgers)-1 {
			if sealed {
				res.HighWatermark = m.LastOffset + 1
			} else {
				res.HighWatermark = lastBounds.last + 1
			}
		} else if res.HighWatermark, err = lg.hwOf(ctx, p); err != nil {
			return res, false, err
		}
		return res, false, nil
	}
	end, err := lg.hwOf(ctx, p)
	if err != nil {
		return res, false, err
	}
	res.HighWatermark = end
	if offset > end {
		if mode != readFresh {
			return res, true, nil
		}
		return res, false, outOfRange(end)
	}
	return res, false, nil
}

// pollTail asks the bookies for the open tail ledger's LAC, whichever
// ledger a read starts in: the high watermark and the last stable offset
// come from the tail, and a read_committed read held at an LSO learned
// from an older ledger would otherwise never see the tail move it on. In
// readPoll mode — a read at the end or held at the LSO with no tail
// watcher — the chain is first re-read if older than pollChainAge: a new
// writer may have added a ledger, which only the chain shows.
//
// A tail that is sealed — known, or learned from this poll (a writer
// fences the ledger it closes, so its bookies answer "fenced") — was
// closed by a roll-over or a hand-over, and records acknowledged since are
// in a ledger after it. In readPoll mode the chain is then re-read at once
// for sealedFresh after this copy first saw that tail sealed with no
// successor (a roll-over registers the next ledger within milliseconds of
// the seal: a record acknowledged in it is in the answer), and at most
// once per pollChainAge after that (an idle partition whose writer closed
// its ledger costs what it did before), and the successor's LAC is polled
// in turn. A failed re-read keeps the chain the read has.
func (lg *Log) pollTail(ctx context.Context, p catalog.Partition, mode readMode) (catalog.Partition, error) {
	if mode == readPoll {
		q, err := lg.chain(ctx, pollChainAge)
		if err != nil {
			return p, err
		}
		if len(q.Ledgers) == 0 {
			return p, nil
		}
		p = q
	}
	for reread := false; ; reread = true {
		ref := p.Ledgers[len(p.Ledgers)-1]
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return p, &ledgerErr{ref.ID, err}
		}
		_, sealed := st.readable()
		if !sealed {
			if _, err := st.rd.PollLAC(ctx); err != nil && ctx.Err() != nil {
				return p, err
			}
			// A bookie that said "fenced" made the reader re-read the
			// ledger's metadata: closed, it has the ledger's end.
			if m := st.rd.Metadata(); m.State.Sealed() {
				st.adopt(ctx, m)
			}
			_, sealed = st.readable()
		}
		if !sealed || mode != readPoll || reread {
			return p, nil
		}
		q, err := lg.chain(ctx, lg.sealedChainAge(ref.ID))
		if err != nil || len(q.Ledgers) == 0 || q.TopicID != p.TopicID {
			return p, nil // the chain the read has (a new incarnation: the next read takes it)
		}
		if q.Ledgers[len(q.Ledgers)-1].ID == ref.ID {
			return q, nil // no successor yet: nothing acknowledged after it
		}
		p = q
	}
}

// sealedChainAge is how old a chain whose tail ledger id is sealed may be
// for a read at the end: 0 within sealedFresh of when this copy first saw
// it sealed there, pollChainAge after.
func (lg *Log) sealedChainAge(id catalog.LedgerID) time.Duration {
	now := lg.ls.cfg.Now()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.sealedTail != id {
		lg.sealedTail, lg.sealedAt = id, now
	}
	if now.Sub(lg.sealedAt) < sealedFresh {
		return 0
	}
	return pollChainAge
}

// sealedFresh is how long after a tail was first seen sealed every read at
// the end re-reads the chain for its successor.
const sealedFresh = time.Second

// pollChainAge bounds how stale a chain a polling read (readPoll) takes:
// a client polling a partition held at its end costs at most one catalog
// read a second.
const pollChainAge = time.Second

// hwOf is the partition's high watermark as known now.
func (lg *Log) hwOf(ctx context.Context, p catalog.Partition) (int64, error) {
	if len(p.Ledgers) == 0 {
		return p.LogStartOffset, nil
	}
	id := p.Ledgers[len(p.Ledgers)-1].ID
	st, err := lg.ledger(ctx, id)
	if err != nil {
		return 0, &ledgerErr{id, err}
	}
	end, err := lg.ls.tailEnd(ctx, st)
	if err != nil {
		return 0, &ledgerErr{id, err}
	}
	return end, nil
}

// entryFor finds the entry holding offset, from a cursor hint or by search.
func (lg *Log) entryFor(ctx context.Context, st *ledgerState, offset, last int64) (int64, error) {
	lg.mu.Lock()
	h, ok := lg.hints[offset]
	lg.mu.Unlock()
	if ok && h.ledger == st.id && h.entry <= last {
		return h.entry, nil
	}
	return lg.ls.findEntry(ctx, st, offset, last)
}

// collect decodes entries first..last into res from offset on, within lim,
// and leaves a cursor hint where it stopped.
func (lg *Log) collect(ctx context.Context, st *ledgerState, first, last, offset int64, lim Limits, res *Result) error {
	ls := lg.ls
	// Read ahead enough entries for the limits (entries stops at
	// MaxBytes), not the whole ledger: up to collectEntries, which the
	// ledger client reads with a few range reads.
	ents, err := ls.entries(ctx, st, first, min(last, first+collectEntries-1), lim.MaxBytes)
	if err != nil {
		return err
	}
	it := record.NewIterator(ls.cfg.Limits)
	next := offset
	stopEntry := first
	for _, en := range ents {
		stopEntry = en.ID
		b, err := ls.learn(st, en)
		if err != nil {
			return err
		}
		if b.last < next {
			continue
		}
		_, batches, err := record.EntryBatches(en.Payload)
		if err != nil {
			return fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, st.id, en.ID, err)
		}
		full, err := appendPayload(it, batches, &next, lim, res)
		if err != nil {
			return fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, st.id, en.ID, err)
		}
		if full {
			break
		}
		next = max(next, b.last+1)
		stopEntry = en.ID + 1
	}
	res.Next = next
	lg.mu.Lock()
	if len(lg.hints) >= DefaultMaxCursorHints {
		clear(lg.hints)
	}
	lg.hints[next] = position{st.id, stopEntry}
	lg.mu.Unlock()
	return nil
}

// collectEntries bounds the entries one read decodes: small entries (a
// busy partition's batches of a few records) would otherwise cost a bookie
// round trip per few records while a consumer catches up.
const collectEntries = 256
