package partlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
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
	// goMu makes spawn's check of closed and its wg.Add one step, and
	// Close sets closed under it before it waits, so no goroutine is
	// counted after Close's Wait began. A leaf, taken under Log.mu
	// (Log.mu → Logs.goMu: the watcher and a chain re-read are spawned
	// under it).
	goMu   sync.Mutex
	closed bool
	wg     sync.WaitGroup

	// mu guards logs. Taken before Log.mu (Logs.mu → Log.mu): get, when
	// it evicts, and Stats lock each Log in turn under it; no other lock
	// is taken and no I/O runs while it is held. A caller may hold its
	// own lock around the call (a fetch member.mu around Follow).
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

// Close stops the tail watchers and background chain re-reads and waits
// for them; none starts once Close began.
func (ls *Logs) Close() {
	ls.goMu.Lock()
	ls.closed = true
	ls.goMu.Unlock()
	ls.cancel()
	ls.wg.Wait()
}

// spawn runs f on a goroutine of its own that Close waits for, and
// reports true; once Close began it runs nothing and reports false.
func (ls *Logs) spawn(f func()) bool {
	ls.goMu.Lock()
	defer ls.goMu.Unlock()
	if ls.closed {
		return false
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		f()
	}()
	return true
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

	// strayMu is held across all of sealStray: a ledger recovery through
	// the ledger client, and refresh, which takes ledgerState.mu
	// (Log.strayMu → ledgerState.mu). It is the one lock of the package
	// held across I/O, and is never taken with Logs.mu or mu held.
	strayMu sync.Mutex // one sealStray at a time

	// mu guards the fields below. Taken under Logs.mu (get, Stats) and
	// under a caller's lock (Follow and its unfollow, under a fetch
	// member.mu); only Logs.goMu is taken and no I/O runs while it is held
	// (followers are signalled without blocking, the watcher and a chain
	// re-read start on their own goroutines).
	mu     sync.Mutex
	part   catalog.Partition
	partAt time.Time
	// sealedTail is the last tail ledger a read at the end found sealed
	// with no successor, and sealedAt when (pollTail).
	sealedTail catalog.LedgerID
	sealedAt   time.Time
	rereading  bool // a background re-read of the chain runs (chainCached)
	ledgers    map[catalog.LedgerID]*ledgerState
	hw         int64 // highest high watermark seen; -1 unknown
	notify     chan struct{}
	watching   bool
	touched    time.Time
	moved      time.Time          // when hw last rose
	hints      map[int64]position // next offset → where it is
	// followers are signalled (without blocking) when hw rises.
	followers map[chan struct{}]int

	// txns: transaction markers read, for read_committed reads (txn.go);
	// its own lock, a leaf.
	txns txnIndex
}

type position struct {
	ledger catalog.LedgerID
	entry  int64
}

func (lg *Log) touch() {
	lg.mu.Lock()
	lg.touched = lg.ls.cfg.Now()
	lg.mu.Unlock()
}
