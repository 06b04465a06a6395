package compactor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/segment"
)

// segmentContentType labels segment objects.
const segmentContentType = "application/vnd.sluice.segment"

// maxMarkerBytes bounds a pending marker read back (they are ~150 bytes).
const maxMarkerBytes = 4 << 10

// objectReaderAt reads an object with ranged GETs: the segment reader's
// io.ReaderAt. Each ReadAt is one request.
type objectReaderAt struct {
	ctx context.Context
	b   *blob.Bucket
	key string
}

func (o objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r, err := o.b.NewRangeReader(o.ctx, o.key, off, int64(len(p)), nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// indexEntries is the index bound that lets a segment of MaxObjectBytes be
// written and read at the default interval.
func (c *Compactor) indexEntries() int {
	return int(c.cfg.MaxObjectBytes/segment.DefaultIndexIntervalBytes) + 1
}

// errMismatch: an object decodes but is not the segment of the ledger it is
// named after (another ledger, other offsets): it is never trusted.
var errMismatch = errors.New("segment does not match its ledger")

// verifyObject reads the whole object back and checks every checksum and
// that it is ledger m's complete segment. Errors: objstore not-found,
// segment.ErrCorrupt, errMismatch, I/O.
func (c *Compactor) verifyObject(ctx context.Context, key string, m catalog.LedgerMetadata) (segment.Info, error) {
	attrs, err := c.deps.Objects.Attributes(ctx, key)
	if err != nil {
		return segment.Info{}, err
	}
	r, err := segment.Open(objectReaderAt{ctx: ctx, b: c.deps.Objects, key: key}, attrs.Size,
		segment.ReaderOptions{MaxSegmentBytes: c.cfg.MaxObjectBytes, MaxIndexEntries: c.indexEntries()})
	if err != nil {
		return segment.Info{}, fmt.Errorf("open segment %s: %w", key, err)
	}
	if err := r.Verify(ctx); err != nil {
		return segment.Info{}, fmt.Errorf("verify segment %s: %w", key, err)
	}
	info := r.Info()
	switch {
	case info.LedgerID != int64(m.ID) || info.TopicID != string(m.TopicID) || int(info.Partition) != m.Partition:
		return info, fmt.Errorf("%s: %w: footer names ledger %d of %s/%d", key, errMismatch, info.LedgerID, info.TopicID, info.Partition)
	case info.FirstOffset != m.FirstOffset || info.LastOffset != m.LastOffset:
		return info, fmt.Errorf("%s: %w: offsets %d..%d, ledger %d has %d..%d", key, errMismatch, info.FirstOffset, info.LastOffset, m.ID, m.FirstOffset, m.LastOffset)
	}
	return info, nil
}

// deleteObject deletes key; a missing object is not an error.
func (c *Compactor) deleteObject(ctx context.Context, key string) error {
	if err := c.deps.Objects.Delete(ctx, key); err != nil && !objstore.IsNotFound(err) {
		return fmt.Errorf("delete object %s: %w", key, err)
	}
	return nil
}

// marker is a pending marker (pending.go): work on a ledger that must wait
// for a grace period and must survive a crash, kept next to the segments so
// the compactor needs no store of its own.
type marker struct {
	// Location is the segment object the ledger points (or will point) at.
	Location string `json:"location,omitempty"`
	// Since is when the grace started (Unix ms, the compactor's clock): when
	// the ledger was first seen OFFLOADED at Location, or DELETED. Zero
	// while staged (written before the catalog update).
	Since int64 `json:"since,omitempty"`
	// Bookies: the bookies may still hold the ledger.
	Bookies bool `json:"bookies,omitempty"`
	// Deleted: the ledger is DELETED; everything goes after DeleteGrace.
	Deleted bool `json:"deleted,omitempty"`
}

func (c *Compactor) writeMarker(ctx context.Context, id catalog.LedgerID, mk marker) error {
	b, err := json.Marshal(mk)
	if err != nil {
		return err
	}
	if err := c.deps.Objects.WriteAll(ctx, c.pendingKey(id), b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("write pending marker of ledger %d: %w", id, err)
	}
	return nil
}

// readMarker returns ledger id's marker; found is false when there is none.
func (c *Compactor) readMarker(ctx context.Context, id catalog.LedgerID) (mk marker, found bool, err error) {
	r, err := c.deps.Objects.NewReader(ctx, c.pendingKey(id), nil)
	if objstore.IsNotFound(err) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, fmt.Errorf("read pending marker of ledger %d: %w", id, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxMarkerBytes+1))
	if err != nil {
		return marker{}, false, fmt.Errorf("read pending marker of ledger %d: %w", id, err)
	}
	if len(b) > maxMarkerBytes {
		return marker{}, false, fmt.Errorf("pending marker of ledger %d is over %d bytes: not ours", id, maxMarkerBytes)
	}
	if err := json.Unmarshal(b, &mk); err != nil {
		return marker{}, false, fmt.Errorf("pending marker of ledger %d: %w", id, err)
	}
	return mk, true, nil
}
