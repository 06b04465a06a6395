// Package partlog reads partitions: it maps an offset to a ledger of the
// partition's chain (catalog) and to an entry of that ledger (binary search
// over the entries' base offsets, O(log n) entry reads, remembered), reads
// entries through the ledger client (never past the LAC of an open ledger),
// decodes the record batches, and wakes waiting readers when the tail grows.
//
// # Tailing
//
// A partition read at its end gets a tail watcher: one goroutine per
// partition that long-polls the LAC of the tail ledger (its own
// client.Reader, so polls never hold up reads), reads the new entries into
// the shared entry cache as soon as the LAC moves, raises the partition's
// high watermark and wakes every waiting reader at once. However many
// consumers follow a tail, the bookies see one long-poll and one read per
// entry. A watcher stops after TailIdle without readers.
//
// A roll-over (the writer seals its ledger and appends a new one to the
// chain) announces itself: the writer fences its closed ledger on its
// bookies (bookkeeper/client, announceClose), the watcher's LAC long-poll
// answers "fenced" at once, and the watcher re-reads the ledger's metadata
// and the chain and moves on to the next ledger (a writer seals a ledger
// before it appends the next; a new owner recovers, and so fences, it
// first). Quiet rounds (TailCheck; while the tail moved within the last
// second, 4 × its usual gap between advances, at least BusyTailCheck)
// re-read the chain only when it is 5 s old (watchChainAge): the fallback for an
// announcement a bookie missed.
//
// # Reads
//
// Read(offset) finds the ledger whose range holds the offset (the last ref
// with FirstOffset ≤ offset), then the entry: a cursor hint left by the
// previous read that ended at this offset (the common case: a consumer
// reading on), else a binary search over entry bounds (first and last
// offset of each entry, decoded from its batches and kept per ledger).
// Entries come from the shared LRU cache or the bookies; records before the
// requested offset in the first batch are skipped. A read never crosses
// into the next ledger: the next call continues there.
//
// Offsets below the partition's log start, or above its high watermark,
// fail with *OutOfRangeError naming the valid range.
//
// # Offloaded ledgers
//
// An OFFLOADED ledger is read from its segment object (objects.go) when
// Config.Objects is set: the object's index replaces the entry search and
// its index intervals stand in for entries in the cache, so Read,
// OffsetForTime and the cursor logic above do not change. A read that
// fails because a ledger is gone — its bookies answer no replica, its
// metadata or object is not found — re-reads the chain and the ledger's
// metadata and retries (Log.recover): a ledger offloaded meanwhile is
// switched to its object, one trimmed by retention (no longer in the
// chain) answers OUT_OF_RANGE with the new log start. Reads that return
// records never wait for the catalog once a chain is cached: one older
// than ChainTTL is re-read in the background (chainCached), so it hides a
// trim for about ChainTTL plus one catalog read. A read that finds nothing
// at the end of a partition no tail watcher follows does ask (readPoll):
// the chain if older than a second, and at once when it holds no ledger —
// the partition's first ledger, new since, holds acknowledged records — or
// when its tail ledger is sealed (known, or learned from the poll of its
// bookies: a writer fences the ledger it closes): the records acknowledged
// since are in a ledger after it.
//
// # Locks
//
// A → B: B is taken while A is held. The package's locks nest only so:
//
//	Logs.mu → Log.mu              get (evictLocked) and Stats look at each Log in turn
//	Log.strayMu → ledgerState.mu  sealStray holds strayMu across refresh and a ledger recovery
//	Log.mu → Logs.goMu            the tail watcher and a chain re-read are spawned under Log.mu
//
// Logs.goMu, ledgerState.mu, entryCache.mu and indexCache.mu are leaves:
// no other lock is taken while one is held. Under Log.mu only goMu is
// taken, and no two Logs' mu are held together. No lock is held across a
// call into the ledger client, the catalog, the object store or
// Config.ReadGate, except strayMu (on purpose: concurrent reads of a
// partition share one recovery), which is never taken with Logs.mu or
// Log.mu held. Under Logs.mu and Log.mu only Config.Now is called;
// followers are signalled without blocking, and the tail watcher and a
// background chain re-read run on goroutines of their own (spawn, which
// Close waits for and which starts none once Close began), so Log.mu
// never waits on a caller.
//
// Callers may hold their own locks when they call in: a fetch session
// calls Follow (Logs.mu, then Log.mu, then goMu) and the unfollow it
// returns (Log.mu) under its member.mu, so member.mu → Logs.mu → Log.mu
// → Logs.goMu. The package never
// calls back into a caller with one of its locks held (Config.Now aside,
// which must take no lock of the caller's), so no order runs the other way.
//
// # Files
//
//	doc.go         this package doc
//	partlog.go     Logs and Log: New, Close, Stats, the partition map (get, evictLocked); OutOfRangeError, ErrCorrupt
//	chain.go       the partition chain cache: chain, setChain, chainCached (re-read in the background after ChainTTL), Prime, TopicChanged/TopicDeleted, locate
//	read.go        Read: Result, Limits, the read modes, readOnce over the chain, pollTail, hwOf, cursor hints (entryFor), collect
//	entries.go     ledgerState and a ledger's entries: entries (cache, then bookies within ReadGate), entry bounds, findEntry, tailEnd
//	decode.go      whole batches or decoded records out of a payload, within Limits; RecordSize
//	offsets.go     CheckEnd, Bounds, BoundsForLag, BoundsWithin, Start, OffsetForTime
//	watch.go       Follow, HighWatermark, Wait, raise; the tail watcher goroutine (watch, watchRound, advance), watchState, quiet
//	recover.go     withRecovery / recover after a "gone" ledger; sealStray
//	objects.go     offloaded ledgers: index opens, ranged GETs of intervals, error classes
//	offloaded.go   collectObject, objectOffsetForTime
//	cache.go       entryCache: the shared byte-bounded LRU of entries and intervals
//	indexcache.go  indexCache: LRU of opened segment indexes
//	config.go      Config (cache, tail timing, ChainTTL, ReadGate, Objects) and SegmentConfig
//
// services/DESIGN.md has the goroutines, the lock order across services
// and the formats.
package partlog
