package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// offloadAll finds up to MaxLedgersPerPass CLOSED ledgers, sealed at least
// OffloadAge ago and not empty, and offloads them on the worker pool.
//
// The CLOSED listing resumes where the previous pass stopped (a cursor
// kept in memory and in the bucket, for Lambda invocations) and starts
// over at its end, so ledgers that are never offloaded — empty ones, kept
// until retention drops them — cannot crowd out the others however many
// there are: every CLOSED ledger is looked at within
// ceil(CLOSED ledgers / MaxScanPerPass) passes.
func (c *Compactor) offloadAll(ctx context.Context, t *tally) {
	if err := c.offloadCursor.load(ctx, c); err != nil {
		t.fail(err)
		return
	}
	var todo []catalog.LedgerMetadata
	token, scanned := string(c.offloadCursor.token), 0
scan:
	for scanned < c.cfg.MaxScanPerPass {
		page, err := c.deps.Catalog.ListLedgersByState(ctx, catalog.LedgerClosed, token, min(catalog.MaxPageSize, c.cfg.MaxScanPerPass-scanned))
		if err != nil {
			if errors.Is(err, catalog.ErrInvalid) {
				token = "" // a stale cursor: start over next pass
			}
			t.fail(fmt.Errorf("list CLOSED ledgers: %w", err))
			break
		}
		scanned += len(page.Items)
		for _, m := range page.Items {
			if m.LastEntry < 0 || c.age(m.ClosedAt) < c.cfg.OffloadAge {
				continue // empty (retention drops it), or too young
			}
			if len(todo) == c.cfg.MaxLedgersPerPass {
				break scan // the cursor stays before this page: the rest next pass
			}
			todo = append(todo, m)
		}
		if token = page.NextPageToken; token == "" {
			break // the end: start over next pass
		}
	}
	if err := c.offloadCursor.save(ctx, c, []byte(token)); err != nil {
		t.fail(err)
	}
	each(ctx, c.cfg.Workers, todo, func(ctx context.Context, m catalog.LedgerMetadata) {
		if ok, err := c.offloadable(ctx, m); err != nil || !ok {
			if err != nil {
				c.log.Warn("offload check failed", slog.Int64("ledger", int64(m.ID)), slog.Any("err", err))
				t.fail(fmt.Errorf("offload ledger %d: %w", m.ID, err))
			}
			return // a transaction open at its end may still need it: a later pass
		}
		n, dropped, err := c.offload(ctx, m)
		if err != nil {
			c.log.Warn("offload failed", slog.Int64("ledger", int64(m.ID)), slog.Any("err", err))
			t.fail(fmt.Errorf("offload ledger %d: %w", m.ID, err))
			return
		}
		t.add(func(r *Report) {
			r.Offloaded++
			r.OffloadBytes += n
			if dropped {
				r.BookieDeletes++
			}
		})
	})
}

// offload moves one CLOSED ledger to its segment object. The order is the
// crash-safety argument (README "Crash safety"):
//
//  1. write the segment under the ledger's deterministic key (or find a
//     complete one a crashed pass left there), abort on any error;
//  2. read it back and verify every checksum and that it is this ledger;
//  3. write the pending marker (staged), so the bookie copies cannot be
//     forgotten if we die right after step 4;
//  4. compare-and-set the ledger CLOSED → OFFLOADED with Location;
//  5. start the marker's grace; the pending step deletes the bookie copies
//     once it is over (at once when there is none).
//
// Nothing is deleted from a bookie before 4 succeeded, and 4 runs only on
// a verified object. It returns the object's size and whether the bookie
// copies were dropped already (no grace).
func (c *Compactor) offload(ctx context.Context, m catalog.LedgerMetadata) (size int64, dropped bool, err error) {
	key := c.segmentKey(m)
	if err := c.deps.Hooks.at(StepBeforeUpload, m.ID); err != nil {
		return 0, false, err
	}
	// A crashed pass may have left the complete object: reuse it.
	info, err := c.verifyObject(ctx, key, m)
	if err != nil {
		c.log.Debug("uploading segment", slog.Int64("ledger", int64(m.ID)), slog.String("key", key))
		if _, err := c.upload(ctx, key, m); err != nil {
			return 0, false, err
		}
		if err := c.deps.Hooks.at(StepAfterUpload, m.ID); err != nil {
			return 0, false, err
		}
		if info, err = c.verifyObject(ctx, key, m); err != nil {
			return 0, false, fmt.Errorf("uploaded segment does not verify: %w", err)
		}
	}
	if err := c.writeMarker(ctx, m.ID, marker{Location: key, Bookies: true}); err != nil {
		return 0, false, err
	}
	if err := c.deps.Hooks.at(StepBeforeCAS, m.ID); err != nil {
		return 0, false, err
	}
	next := m
	next.State, next.Location = catalog.LedgerOffloaded, key
	stored, err := c.deps.Catalog.UpdateLedger(ctx, next)
	if errors.Is(err, catalog.ErrVersionConflict) {
		// Someone changed it since we listed it: decide on a fresh read.
		cur, gerr := c.deps.Catalog.GetLedger(ctx, m.ID)
		if gerr != nil {
			return 0, false, fmt.Errorf("re-read after %w: %w", err, gerr)
		}
		if cur.State != catalog.LedgerOffloaded || cur.Location != key {
			// Retention deleted it, or it changed otherwise: the pending
			// step and the DELETED cleanup take the marker and object.
			return 0, false, fmt.Errorf("ledger changed under the offload (now %v): %w", cur.State, err)
		}
		stored = cur
	} else if err != nil {
		return 0, false, fmt.Errorf("mark OFFLOADED: %w", err)
	}
	c.m.offloaded.Add(ctx, 1)
	c.m.offloadBytes.Add(ctx, info.Size)
	if err := c.deps.Hooks.at(StepAfterCAS, m.ID); err != nil {
		return 0, false, err
	}
	mk := marker{Location: key, Bookies: true, Since: c.cfg.Now().UnixMilli()}
	if c.cfg.BookieDeleteGrace > 0 {
		return info.Size, false, c.writeMarker(ctx, m.ID, mk)
	}
	if err := c.dropBookieCopies(ctx, stored); err != nil {
		return info.Size, false, err
	}
	return info.Size, true, nil
}

// offloadable says whether ledger m may leave the bookies. A segment keeps
// batches, not entry headers, and the ingest writer taking a partition
// over reads the transactions open at the tail from the bookies, starting
// at the entry holding the tail's last stable offset (partition.Writer's
// rebuild); readers take the LSO from the last readable entry's header. So
// a ledger with a transaction open at its end (its last entry has a
// header) stays until a later sealed ledger of its partition ends with
// every such transaction ended — its last entry's LSO beyond m's last
// offset — or a later ledger was offloaded (which needed as much). Then no
// transaction open at the tail can have begun in m, and an offloaded
// last ledger never had one open at its end.
func (c *Compactor) offloadable(ctx context.Context, m catalog.LedgerMetadata) (bool, error) {
	hdr, err := c.lastEntryHeader(ctx, m)
	if err != nil || !hdr.Present {
		return err == nil, err
	}
	p, err := c.deps.Catalog.GetPartition(ctx, m.Topic, m.Partition)
	if errors.Is(err, catalog.ErrNotFound) {
		return false, nil // the topic is gone: its cleanup takes the ledger
	}
	if err != nil {
		return false, fmt.Errorf("read partition %s/%d: %w", m.Topic, m.Partition, err)
	}
	if p.TopicID != m.TopicID {
		return false, nil // another incarnation of the name
	}
	later := false
	for _, ref := range p.Ledgers {
		if ref.ID == m.ID {
			later = true
			continue
		}
		if !later {
			continue
		}
		n, err := c.deps.Catalog.GetLedger(ctx, ref.ID)
		if err != nil {
			return false, fmt.Errorf("read ledger %d: %w", ref.ID, err)
		}
		switch {
		case n.State == catalog.LedgerOffloaded:
			return true, nil
		case n.State != catalog.LedgerClosed:
			return false, nil // open or in recovery: its end is not known yet
		case n.LastEntry < 0:
			continue
		}
		h, err := c.lastEntryHeader(ctx, n)
		if err != nil {
			return false, err
		}
		if !h.Present || h.LSO > m.LastOffset {
			return true, nil
		}
	}
	return false, nil
}

// lastEntryHeader reads the entry header of ledger m's last entry (not
// Present when no transaction was open at its end).
func (c *Compactor) lastEntryHeader(ctx context.Context, m catalog.LedgerMetadata) (record.EntryHeader, error) {
	rd, err := c.deps.Ledgers.OpenReader(ctx, m.ID)
	if err != nil {
		return record.EntryHeader{}, fmt.Errorf("open ledger: %w", err)
	}
	ents, err := rd.Read(ctx, m.LastEntry, m.LastEntry)
	if err != nil {
		return record.EntryHeader{}, fmt.Errorf("read entry %d: %w", m.LastEntry, err)
	}
	if len(ents) != 1 {
		return record.EntryHeader{}, fmt.Errorf("read entry %d: %d entries", m.LastEntry, len(ents))
	}
	hdr, _, err := record.EntryBatches(ents[0].Payload)
	if err != nil {
		return record.EntryHeader{}, fmt.Errorf("entry %d: %w", m.LastEntry, err)
	}
	return hdr, nil
}

// upload writes ledger m's segment to key. On any error the object writer
// is aborted (its context cancelled before Close), so no partial object is
// ever visible: it exists whole or not at all.
func (c *Compactor) upload(ctx context.Context, key string, m catalog.LedgerMetadata) (segment.Info, error) {
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w, err := c.deps.Objects.NewWriter(wctx, key, &blob.WriterOptions{BufferSize: c.cfg.UploadPartBytes, ContentType: segmentContentType})
	if err != nil {
		return segment.Info{}, fmt.Errorf("open object %s: %w", key, err)
	}
	info, err := c.writeSegment(ctx, w, m)
	if err != nil {
		abort()
		_ = w.Close() // reports the abort
		return segment.Info{}, err
	}
	if err := w.Close(); err != nil {
		return segment.Info{}, fmt.Errorf("complete object %s: %w", key, err)
	}
	return info, nil
}

// writeSegment streams the ledger's entries from the bookies into a
// segment writer, a Read (bounded by the ledger client's MaxReadBytes) at
// a time.
func (c *Compactor) writeSegment(ctx context.Context, w *blob.Writer, m catalog.LedgerMetadata) (segment.Info, error) {
	sw, err := segment.NewWriter(w, segment.WriterOptions{
		LedgerID: int64(m.ID), TopicID: string(m.TopicID), Partition: int32(m.Partition),
		MaxSegmentBytes: c.cfg.MaxObjectBytes, MaxIndexEntries: c.indexEntries(),
	})
	if err != nil {
		return segment.Info{}, err
	}
	rd, err := c.deps.Ledgers.OpenReader(ctx, m.ID)
	if err != nil {
		return segment.Info{}, fmt.Errorf("open ledger: %w", err)
	}
	// The mid-upload hook fires once at least a part's worth went to the
	// object writer (on S3, a multipart upload is then under way), or
	// before Finish for a smaller ledger.
	hooked := false
	for e := int64(0); e <= m.LastEntry; {
		ents, err := rd.Read(ctx, e, m.LastEntry)
		if err != nil {
			return segment.Info{}, fmt.Errorf("read entries from %d: %w", e, err)
		}
		for _, en := range ents {
			// The entry header (the LSO as the writer saw it) is not kept:
			// a segment holds batches only. Markers are batches and stay.
			_, batches, err := record.EntryBatches(en.Payload)
			if err != nil {
				return segment.Info{}, fmt.Errorf("entry %d: %w", en.ID, err)
			}
			if err := sw.Append(batches); err != nil {
				return segment.Info{}, fmt.Errorf("entry %d: %w", en.ID, err)
			}
		}
		e = ents[len(ents)-1].ID + 1
		if !hooked && (sw.Size() > int64(c.cfg.UploadPartBytes) || e > m.LastEntry) {
			hooked = true
			if err := c.deps.Hooks.at(StepMidUpload, m.ID); err != nil {
				return segment.Info{}, err
			}
		}
	}
	info, err := sw.Finish()
	if err != nil {
		return segment.Info{}, fmt.Errorf("finish segment: %w", err)
	}
	return info, nil
}
