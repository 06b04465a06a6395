package compactor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func isDone(err error) bool { return errors.Is(err, io.EOF) }

// retention walks the topics (bounded by MaxScanPerPass records) and, for
// each partition of a topic with a time or size limit, trims the ledgers
// past it from the front of the chain and marks them DELETED. Order: trim
// first (the log start moves; readers behind it get OUT_OF_RANGE), then
// DELETED, then — in purge, after DeleteGrace — the data. A crash between
// trim and DELETED leaves sealed ledgers below the chain's head, which the
// next pass finds (leftovers) and marks.
func (c *Compactor) retention(ctx context.Context, t *tally) {
	token, scanned := "", 0
	for scanned < c.cfg.MaxScanPerPass {
		page, err := c.deps.Catalog.ListTopics(ctx, token, min(catalog.MaxPageSize, c.cfg.MaxScanPerPass-scanned))
		if err != nil {
			t.fail(fmt.Errorf("list topics: %w", err))
			return
		}
		scanned += len(page.Items)
		for _, tp := range page.Items {
			if ctx.Err() != nil {
				return
			}
			scanned += c.retainTopic(ctx, t, tp)
		}
		if token = page.NextPageToken; token == "" {
			return
		}
	}
}

// retainTopic applies tp's retention to each of its partitions and returns
// how many partition records it read.
func (c *Compactor) retainTopic(ctx context.Context, t *tally, tp catalog.Topic) int {
	read, token := 0, ""
	for {
		page, err := c.deps.Catalog.ListPartitions(ctx, tp.Name, token, catalog.MaxPageSize)
		if err != nil {
			t.fail(fmt.Errorf("list partitions of %s: %w", tp.Name, err))
			return read
		}
		read += len(page.Items)
		for _, p := range page.Items {
			if p.TopicID != tp.ID || len(p.Ledgers) == 0 {
				continue
			}
			if tp.Config.CleanupPolicy == catalog.CleanupCompact {
				// Kafka's compact policy: no time or size retention.
				n, err := c.compactPartition(ctx, p)
				if err != nil {
					c.log.Warn("compaction failed", slog.String("topic", tp.Name), slog.Int("partition", p.Index), slog.Any("err", err))
					t.fail(fmt.Errorf("compaction of %s/%d: %w", tp.Name, p.Index, err))
				}
				if n > 0 {
					t.add(func(r *Report) { r.Compacted += n })
				}
				continue
			}
			n, err := c.retainPartition(ctx, tp, p)
			if err != nil {
				c.log.Warn("retention failed", slog.String("topic", tp.Name), slog.Int("partition", p.Index), slog.Any("err", err))
				t.fail(fmt.Errorf("retention of %s/%d: %w", tp.Name, p.Index, err))
			}
			if n > 0 {
				t.add(func(r *Report) { r.Trimmed += n })
			}
		}
		if token = page.NextPageToken; token == "" {
			return read
		}
	}
}

// retainPartition trims p and marks what it trimmed (and leftovers of an
// earlier crash) DELETED; it returns how many ledgers it marked.
//
// Cost per pass: sealed ledgers' metadata is cached (what retention reads
// of it — the seal and its time — never changes), so an idle partition
// costs no catalog read beyond its partition record; the leftover check
// (one listing) runs at most every OrphanGrace per partition.
func (c *Compactor) retainPartition(ctx context.Context, tp catalog.Topic, p catalog.Partition) (int, error) {
	marked := 0
	if p.LogStartOffset > 0 && c.due(c.leftovers, fmt.Sprintf("%s/%d", p.TopicID, p.Index), c.cfg.OrphanGrace) {
		n, err := c.markLeftovers(ctx, p)
		if marked += n; err != nil {
			return marked, err
		}
	}
	cfg := tp.Config
	if cfg.RetentionMs == catalog.Unlimited && cfg.RetentionBytes == catalog.Unlimited {
		return marked, nil
	}
	n := 0
	if cfg.RetentionBytes != catalog.Unlimited {
		sizes, err := c.segmentSizes(ctx, p)
		if err != nil {
			return marked, err
		}
		n = sizeTrimCount(sizes, cfg.RetentionBytes)
	}
	// Look at the front: the size plan's ledgers, then as many more as time
	// retention drops.
	var front []catalog.LedgerMetadata
	for i := 0; i < len(p.Ledgers)-1; i++ {
		m, err := c.sealedLedger(ctx, p.Ledgers[i].ID)
		if err != nil {
			return marked, err
		}
		if i >= n && !timeExpired(m, cfg.RetentionMs, c.cfg.Now()) {
			break
		}
		front = append(front, m)
	}
	k := trimmable(front, len(p.Ledgers))
	if k == 0 {
		return marked, nil
	}
	through := front[k-1].ID
	if _, err := c.deps.Catalog.TrimLedgers(ctx, p.TopicID, p.Index, through, p.Version); err != nil {
		if errors.Is(err, catalog.ErrVersionConflict) {
			return marked, nil // the writer rolled meanwhile: next pass
		}
		return marked, fmt.Errorf("trim through ledger %d: %w", through, err)
	}
	c.log.Info("retention trimmed ledgers", slog.String("topic", tp.Name), slog.Int("partition", p.Index),
		slog.Int("ledgers", k), slog.Int64("through", int64(through)), slog.Int64("logStartOffset", p.Ledgers[k].FirstOffset))
	c.m.trimmed.Add(ctx, int64(k))
	for _, m := range front[:k] {
		delete(c.sealed, m.ID)
		cur, err := c.deps.Catalog.GetLedger(ctx, m.ID)
		if err != nil {
			return marked, fmt.Errorf("read ledger %d: %w", m.ID, err)
		}
		if err := c.markDeleted(ctx, cur); err != nil {
			return marked, err
		}
		marked++
	}
	return marked, nil
}

// maxCachedLedgers bounds the sealed-ledger cache (cleared when full).
const maxCachedLedgers = 1_000_000

// sealedLedger returns ledger id's metadata, from the cache when it was
// seen sealed before. A cached record may have an older state and version
// (CLOSED, now OFFLOADED); retention reads only Sealed and ClosedAt of it.
func (c *Compactor) sealedLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	if m, ok := c.sealed[id]; ok {
		return m, nil
	}
	m, err := c.deps.Catalog.GetLedger(ctx, id)
	if err != nil {
		return m, fmt.Errorf("read ledger %d: %w", id, err)
	}
	if m.State.Sealed() && m.State != catalog.LedgerDeleted {
		if len(c.sealed) >= maxCachedLedgers {
			clear(c.sealed)
		}
		c.sealed[id] = m
	}
	return m, nil
}

// due reports whether the work keyed k was last done at least every ago
// (in the map last), and records it as done now if so. Bounded like the
// other per-partition maps.
func (c *Compactor) due(last map[string]time.Time, k string, every time.Duration) bool {
	if t, ok := last[k]; ok && c.age(t) < every {
		return false
	}
	if len(last) >= maxCompactedPartitions {
		clear(last)
	}
	last[k] = c.cfg.Now()
	return true
}

// markLeftovers marks DELETED the sealed ledgers of p below its chain's
// head that are not DELETED yet: trimmed by a pass that died before
// marking them, or created and never appended. Open ones are left alone
// (only recovery may seal them).
func (c *Compactor) markLeftovers(ctx context.Context, p catalog.Partition) (int, error) {
	head := p.Ledgers[0].ID
	page, err := c.deps.Catalog.ListLedgersByPartition(ctx, p.TopicID, p.Index, "", catalog.DefaultPageSize)
	if err != nil {
		return 0, fmt.Errorf("list ledgers of %s/%d: %w", p.Topic, p.Index, err)
	}
	n := 0
	for _, m := range page.Items {
		if m.ID >= head {
			break
		}
		if m.State.Sealed() && m.State != catalog.LedgerDeleted {
			if err := c.markDeleted(ctx, m); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// markDeleted moves a trimmed ledger to DELETED (compare-and-set; a lost
// race re-reads once).
func (c *Compactor) markDeleted(ctx context.Context, m catalog.LedgerMetadata) error {
	for range 2 {
		next := m
		next.State = catalog.LedgerDeleted
		_, err := c.deps.Catalog.UpdateLedger(ctx, next)
		if !errors.Is(err, catalog.ErrVersionConflict) {
			if err != nil {
				return fmt.Errorf("mark ledger %d DELETED: %w", m.ID, err)
			}
			return nil
		}
		if m, err = c.deps.Catalog.GetLedger(ctx, m.ID); err != nil {
			return fmt.Errorf("re-read ledger %d: %w", m.ID, err)
		}
		if m.State == catalog.LedgerDeleted {
			return nil
		}
	}
	return fmt.Errorf("mark ledger %d DELETED: %w", m.ID, catalog.ErrVersionConflict)
}

// segmentSizes returns the size of each chain ledger's segment object, -1
// where there is none (yet): one listing of the partition's prefix.
func (c *Compactor) segmentSizes(ctx context.Context, p catalog.Partition) ([]int64, error) {
	bySeg := make(map[catalog.LedgerID]int64, len(p.Ledgers))
	prefix := fmt.Sprintf("%s%s%s/%d/", c.cfg.Prefix, segmentsDir, p.TopicID, p.Index)
	it := c.deps.Objects.List(&blob.ListOptions{Prefix: prefix})
	// Bounded: a partition holds at most MaxLedgersPerPartition ledgers,
	// plus a few orphans the sweep has not removed yet.
	for range 2 * catalog.MaxLedgersPerPartition {
		obj, err := it.Next(ctx)
		if isDone(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list segments of %s/%d: %w", p.Topic, p.Index, err)
		}
		if id, ok := c.ledgerOfSegment(obj.Key); ok {
			bySeg[id] = obj.Size
		}
	}
	sizes := make([]int64, len(p.Ledgers))
	for i, r := range p.Ledgers {
		s, ok := bySeg[r.ID]
		if !ok {
			s = -1
		}
		sizes[i] = s
	}
	return sizes, nil
}
