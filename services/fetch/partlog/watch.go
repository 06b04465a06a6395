package partlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Follow signals wake (without blocking; give it a buffer of 1) whenever
// the partition's high watermark rises, and keeps its tail watcher running
// until the returned function is called.
func (ls *Logs) Follow(topic string, partition int, wake chan struct{}) (unfollow func()) {
	lg := ls.get(topic, partition)
	lg.mu.Lock()
	if lg.followers == nil {
		lg.followers = make(map[chan struct{}]int)
	}
	lg.followers[wake]++
	lg.startWatchLocked()
	lg.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lg.mu.Lock()
			defer lg.mu.Unlock()
			if lg.followers[wake]--; lg.followers[wake] <= 0 {
				delete(lg.followers, wake)
			}
			lg.touched = ls.cfg.Now()
		})
	}
}

// HighWatermark is the partition's high watermark as last learned (no
// I/O), or -1 when not known yet.
func (ls *Logs) HighWatermark(topic string, partition int) int64 {
	lg := ls.get(topic, partition)
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.hw
}

// Wait returns once the partition's high watermark is above offset, or
// when ctx ends (with ctx's error). It starts the partition's tail watcher.
func (ls *Logs) Wait(ctx context.Context, topic string, partition int, offset int64) error {
	lg := ls.get(topic, partition)
	for {
		lg.mu.Lock()
		ch, hw := lg.notify, lg.hw
		lg.startWatchLocked()
		lg.mu.Unlock()
		if hw > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-ls.ctx.Done():
			return errors.New("partlog: closed")
		}
	}
}

// startWatchLocked starts the tail watcher if it is not running; lg.mu is
// held.
func (lg *Log) startWatchLocked() {
	ls := lg.ls
	lg.touched = ls.cfg.Now()
	if !lg.watching && ls.spawn(lg.watch) {
		lg.watching = true // before watch can look: it takes lg.mu first
	}
}

// raise records a high watermark and wakes waiters when it grew.
func (lg *Log) raise(hw int64) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if hw > lg.hw {
		lg.hw = hw
		lg.moved = lg.ls.cfg.Now()
		close(lg.notify)
		lg.notify = make(chan struct{})
		for ch := range lg.followers {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// watch is a partition's tail watcher (see the package doc). It runs until
// the partition has had no reader for TailIdle or the Logs close; Wait
// and Follow spawn it.
func (lg *Log) watch() {
	ls := lg.ls
	ctx := ls.ctx
	chainAge := ls.cfg.TailCheck
	backoff := 10 * time.Millisecond
	ws := watchState{lac: -1}
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		lg.mu.Lock()
		if ctx.Err() != nil || (len(lg.followers) == 0 && ls.cfg.Now().Sub(lg.touched) > ls.cfg.TailIdle) {
			lg.watching = false
			lg.mu.Unlock()
			return
		}
		lg.mu.Unlock()
		err := lg.watchRound(ctx, chainAge, &ws)
		switch {
		case err == nil:
			// Advanced. Roll-overs announce themselves (errSealed), so
			// the chain is re-read only as a fallback (see errQuiet).
			chainAge, backoff = watchChainAge(ls.cfg), 10*time.Millisecond
		case errors.Is(err, errQuiet):
			// Nothing moved. A roll-over announces itself (the writer
			// fences its closed ledger, and the LAC long-poll answers
			// "fenced": errSealed below), so the chain is re-read only
			// when watchChainAge old: a fallback for an announcement every
			// polled bookie missed, instead of a catalog read per quiet
			// round and partition (up to 40/s each on a busy partition).
			chainAge = watchChainAge(ls.cfg)
		case errors.Is(err, errSealed):
			chainAge = 0 // the tail ledger was closed: find the next one
		case errors.Is(err, errNoTail):
			chainAge = 0
			if !pause(lg.quiet(ws.gap)) {
				continue
			}
		default:
			if ctx.Err() != nil {
				continue
			}
			// NOT_FOUND is a deleted topic (its readers get NOT_FOUND
			// themselves, and the watcher stops after TailIdle without
			// them), not a failure worth a warning per backoff step.
			level := slog.LevelWarn
			if errors.Is(err, catalog.ErrNotFound) {
				level = slog.LevelDebug
			}
			ls.log.Log(ctx, level, "tail watcher failed; retrying", slog.String("topic", lg.key.topic), slog.Int("partition", lg.key.partition),
				slog.Any("err", err), slog.Duration("backoff", backoff))
			chainAge = 0
			pause(backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// watchChainAge is how old a tail watcher lets the partition's chain get
// before it re-reads it, though no roll-over was announced: ChainTTL, at
// least 5 s — one catalog read per followed partition per ChainTTL, the
// same age at which a reader re-reads it (so readers of a followed
// partition rarely need to).
func watchChainAge(cfg Config) time.Duration { return max(cfg.ChainTTL, 5*time.Second) }

var (
	errQuiet  = errors.New("no new entries")
	errSealed = errors.New("the tail ledger was closed")
	errNoTail = errors.New("no open tail ledger")
)

// watchState is what a watcher remembers between rounds.
//
// ledger, lac: how far it made the tail visible (the high watermark was
// raised through entry lac of ledger). The reader's LAC is learned before
// the new entries are read, so a read that fails leaves the LAC ahead of
// this mark; the next round finishes the job before it waits for a newer
// LAC, or the partition would stall until the next produce.
//
// last, gap: when the tail last advanced, and the usual time between
// advances (a moving average), for quiet.
type watchState struct {
	ledger catalog.LedgerID
	lac    int64
	last   time.Time
	gap    time.Duration
}

// advanced records an advance of the tail at now.
func (ws *watchState) advanced(now time.Time) {
	switch d := now.Sub(ws.last); {
	case ws.last.IsZero() || d >= time.Second:
		ws.gap = 0 // idle before: start over
	case ws.gap == 0:
		ws.gap = d
	default:
		ws.gap = (3*ws.gap + d) / 4
	}
	ws.last = now
}

// watchRound long-polls the tail ledger's LAC for up to TailCheck; when it
// moves, reads the new entries into the cache and raises the high
// watermark.
func (lg *Log) watchRound(ctx context.Context, chainAge time.Duration, ws *watchState) error {
	ls := lg.ls
	// The periodic re-read (chainAge > 0) is a fallback — roll-overs and
	// hand-overs announce themselves (errSealed) — so it runs in the
	// background while the round goes on with the chain it has: done
	// inline, every watcher of a copy waited for the catalog at the same
	// moment (they start together), and the emulated catalog answers one
	// call at a time: a delivery stall of ~100-300 ms every ChainTTL in S2.
	// After a seal, or with no tail, the round needs the new chain now.
	read := lg.chain
	if chainAge > 0 {
		read = lg.chainCachedAge
	}
	p, err := read(ctx, chainAge)
	if err != nil {
		return err
	}
	if len(p.Ledgers) == 0 {
		lg.raise(p.LogStartOffset)
		return errNoTail
	}
	// Ledgers before the tail are sealed; learn it so their readers end,
	// and raise the high watermark to their end: a roll-over seals the
	// last entries of a ledger without a LAC push, so only the sealed
	// metadata tells that they are readable.
	for _, ref := range p.Ledgers[max(0, len(p.Ledgers)-3) : len(p.Ledgers)-1] {
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return err
		}
		m := st.metadata()
		if !m.State.Sealed() {
			if m, err = st.refresh(ctx); err != nil {
				return err
			}
		}
		if m.State.Sealed() {
			lg.raise(m.LastOffset + 1)
		}
	}
	st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
	if err != nil {
		return err
	}
	prev, sealed := st.readable()
	if sealed {
		end, err := ls.tailEnd(ctx, st)
		if err != nil {
			return err
		}
		lg.raise(end)
		return errNoTail // sealed, the next ledger not in the chain yet
	}
	if prev >= 0 && (ws.ledger != st.id || ws.lac < prev) {
		// Readable entries this watcher has not made visible: a new tail
		// ledger, or a read that failed after the LAC was learned.
		from := prev
		if ws.ledger == st.id {
			from = ws.lac + 1
		}
		return lg.advance(ctx, st, from, prev, ws)
	}
	wr, err := st.watcher(ctx, ls.lc)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, lg.quiet(ws.gap))
	// The answering bookie sends the entries the advance made readable
	// (as many as advance reads, within its byte bound): into the cache,
	// so the advance needs no read of its own.
	lac, ents, werr := wr.WaitLACEntries(wctx, prev, advanceBytes)
	cancel()
	switch {
	case lac > prev:
		for _, en := range ents {
			if en.ID >= lac-(advanceEntries-1) {
				ls.cache.put(entryKey{ledger: st.id, entry: en.ID}, en.Payload)
			}
		}
		st.rd.LearnLAC(lac)
		ws.advanced(ls.cfg.Now())
		return lg.advance(ctx, st, prev+1, lac, ws)
	case errors.Is(werr, client.ErrLedgerSealed):
		if _, err := st.refresh(ctx); err != nil {
			return err
		}
		end, err := ls.tailEnd(ctx, st)
		if err != nil {
			return err
		}
		lg.raise(end)
		return errSealed
	case werr != nil && ctx.Err() == nil && errors.Is(werr, context.DeadlineExceeded):
		return errQuiet
	default:
		return werr
	}
}

// advanceEntries and advanceBytes bound what an advance reads into the
// cache: read-ahead for the waiting readers.
const (
	advanceEntries = 32
	advanceBytes   = 4 << 20
)

// advance reads entries from..lac of the tail ledger into the cache (the
// last advanceEntries at most), raises the high watermark to the end of
// entry lac, and moves the mark there.
func (lg *Log) advance(ctx context.Context, st *ledgerState, from, lac int64, ws *watchState) error {
	ls := lg.ls
	ents, err := ls.entries(ctx, st, max(from, lac-(advanceEntries-1)), lac, advanceBytes)
	if err != nil {
		return err
	}
	for _, en := range ents {
		if _, err := ls.learn(st, en); err != nil {
			return err
		}
	}
	end, err := ls.tailEnd(ctx, st)
	if err != nil {
		return err
	}
	lg.raise(end)
	ws.ledger, ws.lac = st.id, lac
	return nil
}

// watcher returns the ledger's long-poll reader, opening it.
func (st *ledgerState) watcher(ctx context.Context, lc *client.Client) (*client.Reader, error) {
	st.mu.Lock()
	wr := st.wr
	st.mu.Unlock()
	if wr != nil {
		return wr, nil
	}
	wr, err := lc.OpenReader(ctx, st.id)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wr == nil {
		st.wr = wr
	}
	return st.wr, nil
}

// quiet is how long the tail may stay still before the watcher looks for a
// roll-over (ends its LAC long-poll and re-reads the chain): while it moved
// within the last second, quietGaps × its usual gap between advances,
// within [BusyTailCheck, TailCheck] (BusyTailCheck while the gap is not
// known yet); else TailCheck.
//
// Not simply BusyTailCheck whenever the tail is busy: every round that
// ends without an advance costs a LAC long-poll to each bookie of the
// ensemble (cancelled at the deadline) and a catalog read. A partition
// that advances in bursts — a producer with a sticky partitioner visits
// each partition every few tens of milliseconds — would end a round every
// BusyTailCheck between its bursts: with 16 such partitions about 640
// rounds a second, which on a 2-core sluice dev took a third of the CPU
// and tripled the end-to-end p99 at 10k records/s. A pause of several
// usual gaps is what hints at a roll-over.
func (lg *Log) quiet(gap time.Duration) time.Duration {
	ls := lg.ls
	lg.mu.Lock()
	moved := lg.moved
	lg.mu.Unlock()
	switch {
	case ls.cfg.Now().Sub(moved) >= time.Second:
		return ls.cfg.TailCheck
	case gap == 0:
		return ls.cfg.BusyTailCheck
	}
	return min(max(quietGaps*gap, ls.cfg.BusyTailCheck), ls.cfg.TailCheck)
}

// quietGaps is how many usual gaps between advances a pause lasts before
// the watcher looks for a roll-over.
const quietGaps = 4
