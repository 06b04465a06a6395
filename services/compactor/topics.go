package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// Topic deletion. DeleteTopic only moves the topic record aside; the
// compactor removes the rest. For each deleted topic (bounded per pass):
//
//  1. every ledger of every partition goes to DELETED — open ones first
//     sealed by recovery (fencing a writer that has not noticed the
//     deletion yet), so nothing is deleted under a live writer;
//  2. purge removes each DELETED ledger's objects, bookie copies and
//     metadata (after DeleteGrace, as for retention);
//  3. once no ledger of the topic is left and the deletion is OrphanGrace
//     old — long enough for any writer of the old incarnation to have
//     stopped creating ledgers — PurgeDeletedTopic removes the partition
//     records and the deleted-topic record.
//
// Every step is idempotent and re-derived from the catalog each pass.
func (c *Compactor) deletedTopics(ctx context.Context, t *tally) {
	page, err := c.deps.Catalog.ListDeletedTopics(ctx, "", min(catalog.MaxPageSize, c.cfg.MaxScanPerPass))
	if err != nil {
		t.fail(fmt.Errorf("list deleted topics: %w", err))
		return
	}
	for _, tp := range page.Items {
		if ctx.Err() != nil {
			return
		}
		n, left, err := c.cleanTopic(ctx, tp)
		if n > 0 {
			t.add(func(r *Report) { r.Trimmed += n })
		}
		if err != nil {
			c.log.Warn("deleted topic cleanup failed", slog.String("topic", tp.Name), slog.String("topicID", string(tp.ID)), slog.Any("err", err))
			t.fail(fmt.Errorf("clean up deleted topic %s (%s): %w", tp.Name, tp.ID, err))
			continue
		}
		if left || c.age(tp.DeletedAt) < c.cfg.OrphanGrace {
			continue
		}
		if err := c.deps.Catalog.PurgeDeletedTopic(ctx, tp.ID); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			t.fail(fmt.Errorf("purge deleted topic %s (%s): %w", tp.Name, tp.ID, err))
			continue
		}
		c.log.Info("purged deleted topic", slog.String("topic", tp.Name), slog.String("topicID", string(tp.ID)))
		t.add(func(r *Report) { r.TopicsPurged++ })
	}
}

// cleanTopic marks every ledger of tp DELETED (up to MaxScanPerPass of
// them) and reports how many it marked and whether any ledger is left.
func (c *Compactor) cleanTopic(ctx context.Context, tp catalog.Topic) (marked int, left bool, err error) {
	scanned := 0
	for p := 0; p < tp.Partitions; p++ {
		token := ""
		for {
			if scanned >= c.cfg.MaxScanPerPass {
				return marked, true, nil
			}
			page, err := c.deps.Catalog.ListLedgersByPartition(ctx, tp.ID, p, token, min(catalog.MaxPageSize, c.cfg.MaxScanPerPass-scanned))
			if err != nil {
				return marked, true, err
			}
			scanned += len(page.Items)
			for _, m := range page.Items {
				left = true
				if m.State == catalog.LedgerDeleted {
					continue
				}
				if !m.State.Sealed() {
					if m, err = c.deps.Ledgers.Recover(ctx, m.ID, lastOffsetOf); err != nil {
						return marked, true, fmt.Errorf("seal ledger %d: %w", m.ID, err)
					}
				}
				if err := c.markDeleted(ctx, m); err != nil {
					return marked, true, err
				}
				marked++
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	return marked, left, nil
}

// lastOffsetOf is recovery's entry → last offset rule: the last offset of
// the last batch of the entry's payload (ingest packs whole batches).
func lastOffsetOf(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }
