package partlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// OutOfRangeError: the offset is below the log start or above the high
// watermark.
type OutOfRangeError struct {
	Offset        int64
	Start, End    int64 // valid offsets are Start..End (End is the high watermark: the next offset)
	Topic         string
	Partition     int
	BelowLogStart bool
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d of %s/%d is out of range: valid offsets are %d..%d (log start..high watermark)", e.Offset, e.Topic, e.Partition, e.Start, e.End)
}

// ErrCorrupt: an entry's payload is not a valid sequence of record batches,
// or an offloaded ledger's segment object fails its checks (a checksum,
// its framing, or it holds another ledger). The read stops; it is never
// skipped.
var ErrCorrupt = errors.New("partlog: corrupt data")

// Logs reads the partitions of every topic for one fetch copy. Close stops
// its tail watchers.
type Logs struct {
	cfg   Config
	parts catalog.Partitions
	lc    *client.Client
	cache *entryCache
	log   *slog.Logger
	// objects reads offloaded ledgers; nil without an object store.
	objects *objects

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	logs map[logKey]*Log
}

type logKey struct {
	topic     string
	partition int
}

// New returns the partition logs; lc reads ledgers, parts reads chains.
func New(cfg Config, parts catalog.Partitions, lc *client.Client) (*Logs, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if parts == nil || lc == nil {
		return nil, errors.New("partlog: a catalog and a ledger client are required")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ungated{}, true))
	ls := &Logs{cfg: cfg, parts: parts, lc: lc, cache: newEntryCache(cfg.CacheBytes), log: cfg.Logger,
		ctx: ctx, cancel: cancel, logs: make(map[logKey]*Log)}
	if cfg.Objects != nil {
		ls.objects = newObjects(cfg.Objects, cfg.Segments)
	}
	return ls, nil
}

// Close stops the tail watchers and waits for them.
func (ls *Logs) Close() {
	ls.cancel()
	ls.wg.Wait()
}

// Stats reports the caches and the watched partitions.
type Stats struct {
	CacheBytes         int64
	CacheEntries       int
	CacheHits, Misses  uint64
	Partitions, Tailed int
	// Offloaded ledgers: the cached segment indexes (bytes as estimated,
	// count), index opens and ranged GETs of batches.
	IndexBytes             int64
	Indexes                int
	IndexOpens, ObjectGets uint64
}

// Stats returns counters.
func (ls *Logs) Stats() Stats {
	var s Stats
	s.CacheBytes, s.CacheEntries, s.CacheHits, s.Misses = ls.cache.stats()
	if o := ls.objects; o != nil {
		s.IndexBytes, s.Indexes, _, _ = o.idx.stats()
		s.IndexOpens, s.ObjectGets = o.opens.Load(), o.gets.Load()
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	s.Partitions = len(ls.logs)
	for _, lg := range ls.logs {
		lg.mu.Lock()
		if lg.watching {
			s.Tailed++
		}
		lg.mu.Unlock()
	}
	return s
}

func (ls *Logs) get(topic string, partition int) *Log {
	k := logKey{topic, partition}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if lg, ok := ls.logs[k]; ok {
		return lg
	}
	if len(ls.logs) >= ls.cfg.MaxLogs {
		ls.evictLocked()
	}
	lg := &Log{ls: ls, key: k, hw: -1, notify: make(chan struct{}), ledgers: make(map[catalog.LedgerID]*ledgerState),
		hints: make(map[int64]position), touched: ls.cfg.Now()}
	ls.logs[k] = lg
	return lg
}

// evictLocked drops the least recently read partition that has no watcher.
func (ls *Logs) evictLocked() {
	var oldest *Log
	for _, lg := range ls.logs {
		lg.mu.Lock()
		if !lg.watching && len(lg.followers) == 0 && (oldest == nil || lg.touched.Before(oldest.touched)) {
			oldest = lg
		}
		lg.mu.Unlock()
	}
	if oldest != nil {
		delete(ls.logs, oldest.key)
	}
}

// Log is one partition's read state.
type Log struct {
	ls  *Logs
	key logKey

	strayMu sync.Mutex // one sealStray at a time

	mu        sync.Mutex
	part      catalog.Partition
	partAt    time.Time
	rereading bool // a background re-read of the chain runs (chainCached)
	ledgers   map[catalog.LedgerID]*ledgerState
	hw        int64 // highest high watermark seen; -1 unknown
	notify    chan struct{}
	watching  bool
	touched   time.Time
	moved     time.Time          // when hw last rose
	hints     map[int64]position // next offset → where it is
	// followers are signalled (without blocking) when hw rises.
	followers map[chan struct{}]int
}

type position struct {
	ledger catalog.LedgerID
	entry  int64
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

// startWatchLocked starts the tail watcher if it is not running; lg.mu is
// held.
func (lg *Log) startWatchLocked() {
	ls := lg.ls
	lg.touched = ls.cfg.Now()
	if !lg.watching && ls.ctx.Err() == nil {
		lg.watching = true
		ls.wg.Add(1)
		go lg.watch()
	}
}

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

func (lg *Log) touch() {
	lg.mu.Lock()
	lg.touched = lg.ls.cfg.Now()
	lg.mu.Unlock()
}

// CheckEnd checks that offset is at most the partition's high watermark, as
// a committed offset must be. It answers from this copy's view when that
// already reaches offset (no I/O); otherwise from fresh bounds (the chain
// re-read, the bookies' LAC asked), re-read like a Read past the end
// (freshRetries) before it answers *OutOfRangeError: a client may hold an
// offset a moment before this copy's view has it, and a valid commit must
// not be refused. Offsets below the log start pass.
func (ls *Logs) CheckEnd(ctx context.Context, topic string, partition int, offset int64) error {
	if hw := ls.HighWatermark(topic, partition); offset <= hw {
		return nil
	}
	var start, end int64
	for _, d := range freshRetries {
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		var err error
		if start, end, err = ls.bounds(ctx, topic, partition, 0); err != nil {
			return err
		}
		if offset <= end {
			return nil
		}
	}
	return &OutOfRangeError{Offset: offset, Start: start, End: end, Topic: topic, Partition: partition}
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

// Bounds returns the log start and a fresh high watermark (the chain
// re-read and the bookies' LAC asked now): for start positions and offset
// resets, which must not miss a recent roll-over.
func (ls *Logs) Bounds(ctx context.Context, topic string, partition int) (start, end int64, err error) {
	return ls.bounds(ctx, topic, partition, 0)
}

// BoundsForLag is Bounds with the chain up to ChainTTL old (the LAC is
// still asked now) while its last ledger is open: for reporting lag
// (DescribeGroup, DescribeTrigger), where a catalog read per partition and
// call would cost more than the report is worth. A chain whose tail cannot
// grow (no ledger, or a sealed last one) is read again.
func (ls *Logs) BoundsForLag(ctx context.Context, topic string, partition int) (start, end int64, err error) {
	return ls.bounds(ctx, topic, partition, ls.cfg.ChainTTL)
}

// BoundsWithin is Bounds with the chain up to maxAge old (see Prime).
func (ls *Logs) BoundsWithin(ctx context.Context, topic string, partition int, maxAge time.Duration) (start, end int64, err error) {
	return ls.bounds(ctx, topic, partition, maxAge)
}

// Start returns the partition's log start offset (the first offset still
// retained) from its chain, read from the catalog unless the one known is
// less than maxAge old. Unlike Bounds it asks no bookie.
func (ls *Logs) Start(ctx context.Context, topic string, partition int, maxAge time.Duration) (int64, error) {
	p, err := ls.get(topic, partition).chain(ctx, maxAge)
	if err != nil {
		return 0, err
	}
	return p.LogStartOffset, nil
}

func (ls *Logs) bounds(ctx context.Context, topic string, partition int, chainAge time.Duration) (start, end int64, err error) {
	lg := ls.get(topic, partition)
	p, err := lg.chain(ctx, chainAge)
	if err != nil {
		return 0, 0, err
	}
	if chainAge > 0 {
		// A chain allowed to be old is re-read when its tail cannot grow:
		// no ledger yet (the first write may have come since) or a sealed
		// last ledger (a roll-over or hand-over may have added one).
		// Otherwise a partition written since the chain was read would
		// show its old end, and no lag, for up to chainAge.
		stale := len(p.Ledgers) == 0
		if !stale {
			st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
			if err != nil {
				return 0, 0, err
			}
			_, stale = st.readable()
		}
		if stale {
			if p, err = lg.chain(ctx, 0); err != nil {
				return 0, 0, err
			}
		}
	}
	if len(p.Ledgers) > 0 {
		st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
		if err != nil {
			return 0, 0, err
		}
		if _, sealed := st.readable(); !sealed {
			if _, err := st.rd.PollLAC(ctx); err != nil && ctx.Err() != nil {
				return 0, 0, err
			}
		}
	}
	end, err = lg.hwOf(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	lg.raise(end)
	return p.LogStartOffset, end, nil
}

// OffsetForTime returns the first offset whose record timestamp is at or
// after ts (ms), or the high watermark when there is none. Like Kafka's
// time index it treats each entry's largest timestamp as a running
// maximum: with timestamps that go backwards it returns an offset at or
// before the first qualifying record, never after it. In an offloaded
// ledger the segment's time index finds the interval (same semantics).
func (ls *Logs) OffsetForTime(ctx context.Context, topic string, partition int, ts int64) (int64, error) {
	lg := ls.get(topic, partition)
	var off int64
	err := lg.withRecovery(ctx, func() (err error) {
		off, err = lg.offsetForTime(ctx, ts)
		return err
	})
	return off, err
}

func (lg *Log) offsetForTime(ctx context.Context, ts int64) (int64, error) {
	ls := lg.ls
	p, err := lg.chain(ctx, 0)
	if err != nil {
		return 0, err
	}
	type span struct {
		st   *ledgerState
		last int64
	}
	spans := make([]span, 0, len(p.Ledgers))
	for _, ref := range p.Ledgers {
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return 0, &ledgerErr{ref.ID, err}
		}
		last, _ := st.readable()
		if last >= 0 {
			spans = append(spans, span{st, last})
		}
	}
	maxTS := func(s span, e int64) (int64, error) {
		if s.st.object {
			r, err := ls.index(ctx, s.st.metadata())
			if err != nil {
				return 0, &ledgerErr{s.st.id, err}
			}
			return r.Info().MaxTimestamp, nil
		}
		b, err := ls.entryBounds(ctx, s.st, e)
		if err != nil {
			return 0, &ledgerErr{s.st.id, err}
		}
		return b.maxTS, nil
	}
	// First ledger whose last entry reaches ts.
	var ferr error
	i, _ := slices.BinarySearchFunc(spans, ts, func(s span, t int64) int {
		m, err := maxTS(s, s.last)
		if err != nil {
			ferr = err
			return 1
		}
		if m < t {
			return -1
		}
		return 1
	})
	if ferr != nil {
		return 0, ferr
	}
	if i == len(spans) {
		_, end, err := ls.Bounds(ctx, lg.key.topic, lg.key.partition)
		return end, err
	}
	s := spans[i]
	if s.st.object {
		off, err := lg.objectOffsetForTime(ctx, s.st, ts)
		if err != nil {
			return 0, &ledgerErr{s.st.id, err}
		}
		return off, nil
	}
	lo, hi := int64(0), s.last
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := maxTS(s, mid)
		if err != nil {
			return 0, err
		}
		if m < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	ents, err := ls.entries(ctx, s.st, lo, lo, 1)
	if err != nil {
		return 0, &ledgerErr{s.st.id, err}
	}
	if off, ok, err := ls.firstAtOrAfter(ents[0].Payload, ts); err != nil || ok {
		if err != nil {
			err = fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, s.st.id, lo, err)
		}
		return off, err
	}
	b, err := ls.entryBounds(ctx, s.st, lo)
	if err != nil {
		return 0, &ledgerErr{s.st.id, err}
	}
	return b.last + 1, nil
}

// firstAtOrAfter returns the offset of the first record of payload (record
// batches) with a timestamp at or after ts, and whether there is one.
func (ls *Logs) firstAtOrAfter(payload []byte, ts int64) (int64, bool, error) {
	it := record.NewIterator(ls.cfg.Limits)
	for rest := payload; len(rest) > 0; {
		bt, r, err := record.Split(rest)
		if err != nil {
			return 0, false, err
		}
		rest = r
		if bt.MaxTimestamp() < ts || bt.Attributes().Control() {
			continue
		}
		if err := it.Reset(bt); err != nil {
			return 0, false, err
		}
		for it.Next() {
			if it.Record().Timestamp >= ts {
				return it.Record().Offset, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return 0, false, err
		}
	}
	return 0, false, nil
}
