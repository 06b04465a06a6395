package compactor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// Key compaction (cleanup.policy=compact) keeps the newest record per key
// in a partition's offloaded data, drops tombstones (null values) once
// their ledger was sealed TombstoneDelay ago, and keeps every kept
// record's offset (a compacted segment has gaps, as Kafka's log has).
//
// Scope: the contiguous run of OFFLOADED ledgers at the front of the
// chain. Bookie-resident ledgers after it are not read, so a key whose
// newest record is still on the bookies keeps its newest offloaded record
// too until that ledger is offloaded and the next compaction runs — never
// too little, sometimes a little too much. Records without a key are kept.
// A ledger whose records would all go keeps its last one, so every ledger
// keeps at least one batch and its offsets stay where the chain says.
//
// Transactions (docs/DESIGN.md §2.7): a pass before the others finds each
// transactional batch's outcome from its producer's next marker in the run
// (resolveTxns). Records of aborted transactions go; those of committed
// ones count like any record (and are rewritten in plain batches: they are
// committed); a transaction with no marker in the run (it ends on the
// bookies, or not yet) is kept as stored, batch headers and all, so
// readers resolve it by its marker later, and its records supersede no
// older record of their key (it may still abort). Markers are kept as
// stored: they are what tells a reader a transaction's outcome.
//
// Two passes over the objects: the first builds the key map (key → newest
// offset, its ledger, tombstone) and counts per ledger the records that
// would go; the second rewrites only those ledgers. A rewrite goes to a new
// key (the next generation), is verified, and is swapped in with one
// compare-and-set of the ledger's Location (OFFLOADED → OFFLOADED): readers
// see the old segment or the new one, never a mix. The old object stays
// until the orphan sweep (OrphanGrace), so a reader that read the old
// Location finishes. A crash before the swap leaves an unreferenced new
// object, also swept; a rerun recomputes everything from the objects.

// compactionBatchBytes bounds a rewritten batch (uncompressed).
const compactionBatchBytes = 1 << 20

// compactReadBytes bounds one ranged read while compacting.
const compactReadBytes = 4 << 20

type keyState struct {
	offset    int64
	ledger    int // index in the run
	tombstone bool
	// pinned: a record of the key in an undecided transaction lies below
	// this newest one. Its tombstone stays whatever its age: if that
	// transaction commits, the tombstone is what still deletes the key
	// (Kafka's cleaner does not clean past the first unstable offset).
	pinned bool
}

// compactPartition compacts p if its last compaction here was at least
// CompactInterval ago. It returns the ledgers it rewrote.
func (c *Compactor) compactPartition(ctx context.Context, p catalog.Partition) (int, error) {
	if !c.due(c.compacted, fmt.Sprintf("%s/%d", p.TopicID, p.Index), c.cfg.CompactInterval) {
		return 0, nil
	}
	var run []catalog.LedgerMetadata
	for _, r := range p.Ledgers[:len(p.Ledgers)-1] {
		m, err := c.deps.Catalog.GetLedger(ctx, r.ID)
		if err != nil {
			return 0, fmt.Errorf("read ledger %d: %w", r.ID, err)
		}
		if m.State != catalog.LedgerOffloaded {
			break
		}
		run = append(run, m)
	}
	if len(run) == 0 {
		return 0, nil
	}
	txns, err := c.resolveTxns(ctx, run)
	if err != nil {
		return 0, err
	}
	keys := make(map[string]keyState)
	undecided := make(map[string]int64) // key → its lowest offset in an undecided transaction
	drop := make([]int64, len(run))     // records of each ledger that go
	total := make([]int64, len(run))    // records of each ledger
	for i, m := range run {
		err := c.eachRecord(ctx, m, func(b record.Batch, r *record.Record) error {
			total[i]++
			switch txns.of(b) {
			case txnAborted:
				drop[i]++
				return nil
			case txnUndecided:
				if _, seen := undecided[string(r.Key)]; r.Key != nil && !seen {
					if len(undecided) >= c.cfg.MaxCompactKeys {
						return fmt.Errorf("more than MaxCompactKeys (%d) keys in undecided transactions", c.cfg.MaxCompactKeys)
					}
					undecided[string(r.Key)] = r.Offset
				}
				return nil
			case txnMarker:
				return nil
			}
			if r.Key == nil {
				return nil
			}
			if old, ok := keys[string(r.Key)]; ok {
				drop[old.ledger]++
			} else if len(keys) >= c.cfg.MaxCompactKeys {
				return fmt.Errorf("more than MaxCompactKeys (%d) keys", c.cfg.MaxCompactKeys)
			}
			keys[string(r.Key)] = keyState{offset: r.Offset, ledger: i, tombstone: r.Value == nil}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("ledger %d: %w", m.ID, err)
		}
	}
	for k, ks := range keys {
		if o, ok := undecided[k]; ok && o < ks.offset {
			ks.pinned = true
			keys[k] = ks
		}
		if ks.tombstone && !ks.pinned && c.tombstoneExpired(run[ks.ledger]) {
			drop[ks.ledger]++
		}
	}
	rewritten := 0
	for i, m := range run {
		if drop[i] == 0 {
			continue
		}
		if err := c.rewrite(ctx, m, keys, txns); err != nil {
			return rewritten, fmt.Errorf("compact ledger %d: %w", m.ID, err)
		}
		rewritten++
	}
	return rewritten, nil
}

// maxCompactedPartitions bounds the compaction timestamps kept in memory.
const maxCompactedPartitions = 100_000

func (c *Compactor) tombstoneExpired(m catalog.LedgerMetadata) bool {
	return c.age(m.ClosedAt) >= c.cfg.TombstoneDelay
}

// keep decides one record of ledger m that is neither a marker nor in a
// transaction that aborted or is undecided: newest for its key and not an
// expired tombstone, or keyless.
func (c *Compactor) keep(m catalog.LedgerMetadata, keys map[string]keyState, r *record.Record) bool {
	if r.Key == nil {
		return true
	}
	ks := keys[string(r.Key)]
	return ks.offset == r.Offset && !(ks.tombstone && !ks.pinned && c.tombstoneExpired(m))
}

// eachRecord calls f on every record of an offloaded ledger's segment, with
// its batch, in offset order, reading compactReadBytes at a time.
func (c *Compactor) eachRecord(ctx context.Context, m catalog.LedgerMetadata, f func(record.Batch, *record.Record) error) error {
	it := record.NewIterator(record.Limits{})
	return c.eachBatch(ctx, m, func(b record.Batch) error {
		if err := it.Reset(b); err != nil {
			return err
		}
		for it.Next() {
			if err := f(b, it.Record()); err != nil {
				return err
			}
		}
		return it.Err()
	})
}

// eachBatch calls f on every batch of an offloaded ledger's segment, in
// offset order (the batch is valid during the call only).
func (c *Compactor) eachBatch(ctx context.Context, m catalog.LedgerMetadata, f func(record.Batch) error) error {
	attrs, err := c.deps.Objects.Attributes(ctx, m.Location)
	if err != nil {
		return err
	}
	sr, err := segment.Open(objectReaderAt{ctx: ctx, b: c.deps.Objects, key: m.Location}, attrs.Size,
		segment.ReaderOptions{MaxSegmentBytes: c.cfg.MaxObjectBytes, MaxIndexEntries: c.indexEntries()})
	if err != nil {
		return err
	}
	var buf []byte
	for rng, ok := sr.Interval(0), true; ok; rng, ok = sr.Next(rng) {
		rng = sr.Extend(rng, compactReadBytes)
		data, err := sr.ReadRange(rng, buf)
		if err != nil {
			return err
		}
		buf = data
		bi := sr.Batches(rng, data)
		for bi.Next() {
			if err := f(record.Batch(bi.Batch())); err != nil {
				return err
			}
		}
		if err := bi.Err(); err != nil {
			return err
		}
	}
	return nil
}

// rewrite writes ledger m's kept records to its next compacted segment,
// verifies it and swaps it in.
func (c *Compactor) rewrite(ctx context.Context, m catalog.LedgerMetadata, keys map[string]keyState, txns txnOutcomes) error {
	key := c.compactedKey(m)
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w, err := c.deps.Objects.NewWriter(wctx, key, &blob.WriterOptions{BufferSize: c.cfg.UploadPartBytes, ContentType: segmentContentType})
	if err != nil {
		return fmt.Errorf("open object %s: %w", key, err)
	}
	if err := c.writeCompacted(ctx, w, m, keys, txns); err != nil {
		abort()
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("complete object %s: %w", key, err)
	}
	if err := c.verifyCompacted(ctx, key, m); err != nil {
		return err
	}
	if err := c.deps.Hooks.at(StepBeforeCAS, m.ID); err != nil {
		return err
	}
	next := m
	next.Location = key
	if _, err := c.deps.Catalog.UpdateLedger(ctx, next); err != nil {
		// The new object is unreferenced: the sweep removes it.
		return fmt.Errorf("swap in %s: %w", key, err)
	}
	c.log.Info("compacted ledger", slog.Int64("ledger", int64(m.ID)), slog.String("from", m.Location), slog.String("to", key))
	c.m.compacted.Add(ctx, 1)
	return nil
}

// writeCompacted streams the kept records into a segment: runs of
// consecutive offsets share a batch (up to compactionBatchBytes); a gap
// starts a new batch at the next kept offset. Markers and undecided
// transactions' batches are copied as stored; aborted transactions'
// records are left out.
func (c *Compactor) writeCompacted(ctx context.Context, w *blob.Writer, m catalog.LedgerMetadata, keys map[string]keyState, txns txnOutcomes) error {
	sw, err := segment.NewWriter(w, segment.WriterOptions{
		LedgerID: int64(m.ID), TopicID: string(m.TopicID), Partition: int32(m.Partition),
		MaxSegmentBytes: c.cfg.MaxObjectBytes, MaxIndexEntries: c.indexEntries(),
	})
	if err != nil {
		return err
	}
	bld, err := record.NewBuilder(record.BuilderOptions{Limits: record.Limits{MaxBatchBytes: compactionBatchBytes}})
	if err != nil {
		return err
	}
	base, next := int64(-1), int64(-1)
	flush := func() error {
		if bld.Len() == 0 {
			return nil
		}
		b, err := bld.Build()
		if err != nil {
			return err
		}
		record.SetBaseOffset(b, base)
		base = -1
		if err := bld.Reset(record.BuilderOptions{Limits: record.Limits{MaxBatchBytes: compactionBatchBytes}}); err != nil {
			return err
		}
		return sw.Append(b)
	}
	add := func(r *record.Record) error {
		if base >= 0 && r.Offset != next {
			if err := flush(); err != nil {
				return err
			}
		}
		err := bld.Append(r)
		if errors.Is(err, record.ErrBatchFull) {
			if err := flush(); err != nil {
				return err
			}
			err = bld.Append(r)
		}
		if err != nil {
			return err
		}
		if base < 0 {
			base = r.Offset
		}
		next = r.Offset + 1
		return nil
	}
	maxTs, lastKept := int64(-1), int64(-1)
	it := record.NewIterator(record.Limits{})
	err = c.eachBatch(ctx, m, func(b record.Batch) error {
		maxTs = max(maxTs, b.MaxTimestamp())
		switch txns.of(b) {
		case txnAborted:
			return nil
		case txnUndecided, txnMarker:
			if err := flush(); err != nil {
				return err
			}
			lastKept = b.LastOffset()
			return sw.Append(b)
		}
		if err := it.Reset(b); err != nil {
			return err
		}
		for it.Next() {
			r := it.Record()
			if c.keep(m, keys, r) {
				lastKept = r.Offset
				if err := add(r); err != nil {
					return err
				}
			}
		}
		return it.Err()
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if lastKept < m.LastOffset {
		// Mark the ledger's end, as Kafka's cleaner keeps empty batches:
		// the segment then always ends at the ledger's last offset (and a
		// ledger whose every record went still has a batch).
		if err := sw.Append(emptyBatch(m.LastOffset, max(maxTs, 0))); err != nil {
			return err
		}
	}
	_, err = sw.Finish()
	return err
}

// verifyCompacted reads a compacted segment back: every checksum, the
// ledger's identity, offsets within the ledger's, ending at its last.
func (c *Compactor) verifyCompacted(ctx context.Context, key string, m catalog.LedgerMetadata) error {
	attrs, err := c.deps.Objects.Attributes(ctx, key)
	if err != nil {
		return err
	}
	r, err := segment.Open(objectReaderAt{ctx: ctx, b: c.deps.Objects, key: key}, attrs.Size,
		segment.ReaderOptions{MaxSegmentBytes: c.cfg.MaxObjectBytes, MaxIndexEntries: c.indexEntries()})
	if err != nil {
		return fmt.Errorf("open compacted segment %s: %w", key, err)
	}
	if err := r.Verify(ctx); err != nil {
		return fmt.Errorf("verify compacted segment %s: %w", key, err)
	}
	info := r.Info()
	if info.LedgerID != int64(m.ID) || info.FirstOffset < m.FirstOffset || info.LastOffset != m.LastOffset {
		return fmt.Errorf("%s: %w: ledger %d offsets %d..%d, ledger %d has %d..%d", key, errMismatch, info.LedgerID, info.FirstOffset, info.LastOffset, m.ID, m.FirstOffset, m.LastOffset)
	}
	return nil
}

// emptyBatch is a RecordBatch v2 with no records at offset: Kafka's
// cleaner leaves such batches too; record.Iterator reads it as zero
// records. Header fields, big-endian: baseOffset, batchLength (49: the
// header after the length field), partitionLeaderEpoch 0, magic 2, crc
// (CRC-32C from attributes on), attributes 0, lastOffsetDelta 0,
// base/maxTimestamp ts, producerId/epoch/baseSequence -1, recordCount 0.
func emptyBatch(offset, ts int64) []byte {
	b := make([]byte, record.HeaderSize)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(offset))
	be.PutUint32(b[8:], uint32(record.HeaderSize-12))
	b[16] = record.Magic
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts))
	be.PutUint64(b[43:], math.MaxUint64) // producerId -1
	be.PutUint16(b[51:], math.MaxUint16) // producerEpoch -1
	be.PutUint32(b[53:], math.MaxUint32) // baseSequence -1
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
