package partlog

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// TopicChanged tells the logs that topic names incarnation id now (the
// topic was deleted and created again): the partitions of any other
// incarnation forget their chain, ledgers and high watermark, so the next
// read asks the catalog instead of serving the old incarnation's records
// from a chain cached up to ChainTTL.
func (ls *Logs) TopicChanged(topic string, id catalog.TopicID) {
	ls.forget(topic, func(cached catalog.TopicID) bool { return cached != id })
}

// TopicDeleted forgets what the logs cached of incarnation id of topic.
func (ls *Logs) TopicDeleted(topic string, id catalog.TopicID) {
	ls.forget(topic, func(cached catalog.TopicID) bool { return cached == id })
}

func (ls *Logs) forget(topic string, stale func(catalog.TopicID) bool) {
	ls.mu.Lock()
	var logs []*Log
	for k, lg := range ls.logs {
		if k.topic == topic {
			logs = append(logs, lg)
		}
	}
	ls.mu.Unlock()
	for _, lg := range logs {
		lg.mu.Lock()
		if lg.part.TopicID != "" && stale(lg.part.TopicID) {
			lg.part, lg.partAt = catalog.Partition{}, time.Time{}
			lg.ledgers = make(map[catalog.LedgerID]*ledgerState)
			lg.hints = make(map[int64]position)
			lg.hw = -1
		}
		lg.mu.Unlock()
	}
}

// chain returns the partition record, re-read when older than maxAge.
func (lg *Log) chain(ctx context.Context, maxAge time.Duration) (catalog.Partition, error) {
	now := lg.ls.cfg.Now()
	lg.mu.Lock()
	if !lg.partAt.IsZero() && now.Sub(lg.partAt) < maxAge {
		p := lg.part
		lg.mu.Unlock()
		return p, nil
	}
	lg.mu.Unlock()
	p, err := lg.ls.parts.GetPartition(ctx, lg.key.topic, lg.key.partition)
	if err != nil {
		return catalog.Partition{}, err
	}
	return lg.setChain(p, now), nil
}

// setChain stores a partition record read at now as the chain, unless an
// older read finished late, and returns the chain in force.
func (lg *Log) setChain(p catalog.Partition, now time.Time) catalog.Partition {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.part.TopicID != "" && p.TopicID != lg.part.TopicID {
		// The topic was deleted and created again: nothing carries over.
		lg.ledgers = make(map[catalog.LedgerID]*ledgerState)
		lg.hints = make(map[int64]position)
		lg.hw = -1
	} else if p.Version < lg.part.Version {
		return lg.part // an older read finished late
	}
	lg.part, lg.partAt = p, now
	keep := make(map[catalog.LedgerID]bool, len(p.Ledgers))
	for _, r := range p.Ledgers {
		keep[r.ID] = true
	}
	for id := range lg.ledgers {
		if !keep[id] {
			delete(lg.ledgers, id)
		}
	}
	return p
}

// chainCached returns the partition record as cached; one older than
// ChainTTL is re-read in the background (one read at a time per
// partition) while this read goes on with it. Only a partition never read
// waits for the catalog. A read must not wait for the catalog on every
// ChainTTL: a consumer's session reads its partitions one after another,
// and with a slow catalog every partition's chain read stalled them all.
// Staleness is safe: a chain grows only by a ledger appended after the
// tail was sealed (found by reads beyond the end, which read it fresh),
// and a read of a ledger trimmed meanwhile fails and re-reads the chain
// (Log.recover).
func (lg *Log) chainCached(ctx context.Context) (catalog.Partition, error) {
	return lg.chainCachedAge(ctx, lg.ls.cfg.ChainTTL)
}

// chainCachedAge is chainCached with maxAge in place of ChainTTL.
func (lg *Log) chainCachedAge(ctx context.Context, maxAge time.Duration) (catalog.Partition, error) {
	ls := lg.ls
	lg.mu.Lock()
	if lg.partAt.IsZero() {
		lg.mu.Unlock()
		return lg.chain(ctx, maxAge)
	}
	p := lg.part
	if ls.cfg.Now().Sub(lg.partAt) >= maxAge && !lg.rereading {
		// Set before the re-read can clear it: it takes lg.mu first.
		lg.rereading = ls.spawn(func() {
			rctx, cancel := context.WithTimeout(ls.ctx, chainRereadTimeout)
			_, err := lg.chain(rctx, 0)
			cancel()
			lg.mu.Lock()
			lg.rereading = false
			lg.mu.Unlock()
			if err != nil && ls.ctx.Err() == nil {
				ls.log.Debug("re-reading a partition's chain failed", slog.String("topic", lg.key.topic), slog.Int("partition", lg.key.partition), slog.Any("err", err))
			}
		})
	}
	lg.mu.Unlock()
	return p, nil
}

// chainRereadTimeout bounds a background re-read of a chain.
const chainRereadTimeout = 10 * time.Second

// locate returns the index of the chain ref whose range holds offset (the
// last with FirstOffset ≤ offset), or -1.
func locate(chain []catalog.LedgerRef, offset int64) int {
	i, _ := slices.BinarySearchFunc(chain, offset+1, func(r catalog.LedgerRef, t int64) int {
		if r.FirstOffset < t {
			return -1
		}
		return 1
	})
	return i - 1
}

// Prime stores partition records the caller just read in one go (a page of
// ListPartitions) as the partitions' chains, so that calls allowing a chain
// that old (Start, BoundsWithin) read none of them one by one.
func (ls *Logs) Prime(parts []catalog.Partition) {
	now := ls.cfg.Now()
	for _, p := range parts {
		ls.get(p.Topic, p.Index).setChain(p, now)
	}
}
