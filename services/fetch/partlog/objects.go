package partlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/segment"
)

// Reads of offloaded ledgers.
//
// An OFFLOADED ledger's catalog Location is the key of a segment object
// (pkg/segment): its batches as the ledger stored them, cut into index
// intervals (64 KiB by default) at batch boundaries. Such a ledger is read
// from the object, not the bookies (which drop it after a grace period):
//
//   - its index (footer, offset and time index) is opened once per object
//     — a HEAD for the size and one ranged GET of the object's tail — and
//     kept in the index cache (LRU, SegmentConfig.IndexCacheBytes and
//     MaxIndexes);
//   - an offset is found in the index (no I/O), and the intervals from the
//     one holding it on are fetched with one ranged GET of at most
//     SegmentConfig.ReadBytes; each interval's CRC32C (and every batch's
//     framing and CRC) is checked before any of it is used, and each
//     interval is then one unit of the shared entry cache, keyed by
//     (ledger, interval start, object key), so the records are decoded by
//     the same code as bookie entries;
//   - every I/O on behalf of a reader (index opens and interval reads)
//     takes the read budget (Config.ReadGate), like a bookie cache miss.
//
// A ledger that is offloaded while a reader is in it is switched to when a
// bookie read fails and the catalog says OFFLOADED (Log.recover); entries
// already cached keep serving meanwhile. A damaged object is ErrCorrupt,
// never data.
//
// Two readers opening the same cold index at once both open it (no
// single-flight): the read budget bounds that, and the first to finish
// fills the cache.

// ErrObjectMissing: the catalog says a ledger is offloaded to an object that
// the object store does not have (after the chain and the ledger's
// metadata were re-read). It should not happen: the compactor verifies the
// object before it marks the ledger, and deletes it only after the ledger
// left the chain. A fetch copy pointed at the wrong bucket sees it.
var ErrObjectMissing = errors.New("partlog: the offloaded ledger's segment object is missing")

// ErrNoObjectStore: a ledger the bookies no longer hold is offloaded, and
// this fetch copy has no object store (Config.Objects) to read it from.
var ErrNoObjectStore = errors.New("partlog: the ledger is offloaded and no object store is configured")

// objects reads segment objects for one Logs.
type objects struct {
	bucket *blob.Bucket
	cfg    SegmentConfig
	idx    *indexCache

	gets, opens atomic.Uint64 // ranged GETs of batches; index opens
}

func newObjects(b *blob.Bucket, cfg SegmentConfig) *objects {
	return &objects{bucket: b, cfg: cfg, idx: newIndexCache(cfg.IndexCacheBytes, cfg.MaxIndexes)}
}

// index returns the opened segment of an offloaded ledger, from the cache
// or opened (through the read budget) and checked against the ledger's
// metadata: an object holding another ledger, or offsets outside the
// ledger's, is corrupt.
func (ls *Logs) index(ctx context.Context, m catalog.LedgerMetadata) (*segment.Reader, error) {
	o := ls.objects
	if r, ok := o.idx.get(m.Location); ok {
		return r, nil
	}
	release, err := ls.gate(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	o.opens.Add(1)
	octx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	attrs, err := o.bucket.Attributes(octx, m.Location)
	if err != nil {
		return nil, o.requestErr(ctx, m, "open the index of", err)
	}
	r, err := segment.Open(&rangeReaderAt{ctx: octx, b: o.bucket, key: m.Location}, attrs.Size, o.cfg.Reader)
	if err != nil {
		return nil, o.requestErr(ctx, m, "open the index of", err)
	}
	info := r.Info()
	switch {
	case info.LedgerID != int64(m.ID) || info.TopicID != string(m.TopicID) || int(info.Partition) != m.Partition:
		return nil, fmt.Errorf("%w: ledger %d: object %q holds ledger %d of topic %q partition %d", ErrCorrupt, m.ID, m.Location, info.LedgerID, info.TopicID, info.Partition)
	case info.FirstOffset < m.FirstOffset || info.LastOffset > m.LastOffset:
		return nil, fmt.Errorf("%w: ledger %d: object %q holds offsets %d..%d, outside the ledger's %d..%d", ErrCorrupt, m.ID, m.Location, info.FirstOffset, info.LastOffset, m.FirstOffset, m.LastOffset)
	}
	o.idx.put(m.Location, r, indexSize(info, m.Location))
	return r, nil
}

// indexSize estimates the memory of an opened segment: its decoded index
// entries (24 and 16 bytes) plus the footer and bookkeeping.
func indexSize(info segment.Info, key string) int64 {
	return int64(info.IndexEntries)*24 + int64(info.TimeIndexEntries)*16 + 512 + int64(len(key))
}

// requestErr is objectErr for a request bounded by Timeout: one that ran
// out of it while the reader's ctx is live is UNAVAILABLE-worthy, not the
// reader's deadline.
func (o *objects) requestErr(ctx context.Context, m catalog.LedgerMetadata, what string, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s ledger %d object %q: the object store did not answer within %v", what, m.ID, m.Location, o.cfg.Timeout)
	}
	return objectErr(m, err)
}

// objectErr classifies an error reading ledger m's object: corruption is
// ErrCorrupt (DATA_LOSS: never skipped), a missing object ErrObjectMissing
// (Log.recover re-reads the chain and the metadata before believing it).
func objectErr(m catalog.LedgerMetadata, err error) error {
	switch {
	case errors.Is(err, segment.ErrCorrupt):
		return fmt.Errorf("%w: ledger %d object %q: %w", ErrCorrupt, m.ID, m.Location, err)
	case objstore.IsNotFound(err):
		return fmt.Errorf("%w: ledger %d object %q: %w", ErrObjectMissing, m.ID, m.Location, err)
	}
	return fmt.Errorf("read ledger %d object %q: %w", m.ID, m.Location, err)
}

// intervals returns the payloads (batches) of the index intervals from rng
// on, from the entry cache or read, until maxBytes are reached (at least
// one interval) or the segment ends. A read takes a run of uncached
// intervals of at most ReadBytes (or the one interval) in one ranged GET.
func (ls *Logs) intervals(ctx context.Context, m catalog.LedgerMetadata, r *segment.Reader, rng segment.Range, maxBytes int) ([][]byte, error) {
	var out [][]byte
	size := 0
	key := func(rg segment.Range) entryKey { return entryKey{ledger: m.ID, entry: rg.Start, object: m.Location} }
	for ok := true; ok && (len(out) == 0 || size < maxBytes); {
		if p, hit := ls.cache.get(key(rng)); hit {
			out = append(out, p)
			size += len(p)
			rng, ok = r.Next(rng)
			continue
		}
		run := rng
		for {
			nx, more := r.Next(run)
			if !more || run.Len()+nx.Len() > int64(ls.cfg.Segments.ReadBytes) || ls.cache.has(key(nx)) {
				break
			}
			run.End = nx.End
		}
		data, err := ls.readRun(ctx, m, r, run)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		for iv := rng; ; iv, _ = r.Next(iv) {
			p := data[iv.Start-run.Start : iv.End-run.Start]
			if iv.Len() != run.Len() {
				p = append([]byte(nil), p...) // not pinning the whole run's buffer in the cache
			}
			ls.cache.put(key(iv), p)
			out = append(out, p)
			size += len(p)
			if iv.End >= run.End {
				break
			}
		}
		rng, ok = r.Next(run)
	}
	return out, nil
}

// readRun reads a run of whole intervals with one ranged GET (through the
// read budget) and checks every interval and batch in it.
func (ls *Logs) readRun(ctx context.Context, m catalog.LedgerMetadata, r *segment.Reader, run segment.Range) ([]byte, error) {
	release, err := ls.gate(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	o := ls.objects
	o.gets.Add(1)
	data := make([]byte, run.Len())
	octx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	err = (&rangeReaderAt{ctx: octx, b: o.bucket, key: m.Location}).readFull(data, run.Start)
	cancel()
	if err != nil {
		return nil, o.requestErr(ctx, m, "read", err)
	}
	it := r.Batches(run, data)
	for it.Next() {
	}
	if err := it.Err(); err != nil {
		return nil, objectErr(m, err)
	}
	return data, nil
}

// rangeReaderAt reads an object with ranged GETs. A segment.Reader keeps
// the one it was opened with, but this package never reads through a
// cached Reader (it fetches ranges itself, with the caller's context), so
// the context, the opener's, is only used during segment.Open.
type rangeReaderAt struct {
	ctx context.Context
	b   *blob.Bucket
	key string
}

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	rd, err := r.b.NewRangeReader(r.ctx, r.key, off, int64(len(p)), nil)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return io.ReadFull(rd, p)
}

// readFull reads exactly len(p) bytes at off; a short object is corrupt.
func (r *rangeReaderAt) readFull(p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &segment.CorruptError{Section: segment.SectionObject, Pos: off, Reason: fmt.Sprintf("short read: %d of %d bytes", n, len(p)), Err: err}
	}
	return err
}
