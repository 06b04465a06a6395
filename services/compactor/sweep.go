package compactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
)

// cursor is where a listing that spans passes goes on: a page token, kept
// in memory and stored in the bucket (under key) so a Lambda invocation
// continues where the previous one stopped. Guarded by Compactor.mu.
type cursor struct {
	key    string // object key, after Config.Prefix
	token  []byte
	loaded bool
}

// maxCursorBytes bounds the stored page token read back.
const maxCursorBytes = 4 << 10

// load reads the stored token once per process.
func (cur *cursor) load(ctx context.Context, c *Compactor) error {
	if cur.loaded {
		return nil
	}
	b, err := c.deps.Objects.ReadAll(ctx, c.cfg.Prefix+cur.key)
	switch {
	case err == nil && len(b) <= maxCursorBytes:
		cur.token = b
	case err != nil && !objstore.IsNotFound(err):
		return fmt.Errorf("read cursor %s: %w", cur.key, err)
	}
	cur.loaded = true
	return nil
}

// save stores token if it changed.
func (cur *cursor) save(ctx context.Context, c *Compactor, token []byte) error {
	if bytes.Equal(token, cur.token) {
		return nil
	}
	cur.token = token
	if err := c.deps.Objects.WriteAll(ctx, c.cfg.Prefix+cur.key, token, nil); err != nil {
		return fmt.Errorf("write cursor %s: %w", cur.key, err)
	}
	return nil
}

// sweepPage looks at one page (MaxSweepPerPass) of segment objects and
// deletes those no ledger points at, once older than OrphanGrace. An
// object is kept while its ledger is not sealed or is CLOSED (an offload
// may be between upload and catalog update: it will reuse the object), or
// OFFLOADED/DELETED pointing at it (DELETED ones go with their purge). So
// an orphan is an object whose ledger is gone, or points elsewhere (a
// segment replaced by its compacted rewrite, or a rewrite whose catalog
// swap never happened).
func (c *Compactor) sweepPage(ctx context.Context, t *tally) {
	objs, ok := c.listPage(ctx, t, &c.sweep, segmentsDir, c.cfg.MaxSweepPerPass)
	if !ok {
		return
	}
	for _, obj := range objs {
		if ctx.Err() != nil {
			return
		}
		orphan, err := c.isOrphan(ctx, obj)
		if err != nil {
			t.fail(err)
			continue
		}
		if !orphan {
			continue
		}
		if err := c.deleteObject(ctx, obj.Key); err != nil {
			t.fail(err)
			continue
		}
		c.log.Info("deleted orphan segment object", slog.String("key", obj.Key))
		c.m.orphans.Add(ctx, 1)
		t.add(func(r *Report) { r.Orphans++ })
	}
}

// listPage lists one page of up to n objects under dir from cur, moving
// cur on (and back to the start after the last page). ok is false on an
// error, which it reports; a stale token is dropped.
func (c *Compactor) listPage(ctx context.Context, t *tally, cur *cursor, dir string, n int) (objs []*blob.ListObject, ok bool) {
	if err := cur.load(ctx, c); err != nil {
		t.fail(err)
		return nil, false
	}
	token := cur.token
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	objs, next, err := c.deps.Objects.ListPage(ctx, token, n, &blob.ListOptions{Prefix: c.cfg.Prefix + dir})
	if isDone(err) { // nothing (more) to list: start over next time
		objs, next, err = nil, nil, nil
	}
	if err != nil {
		_ = cur.save(ctx, c, nil) // a stale or foreign token: start over
		t.fail(fmt.Errorf("list %s: %w", dir, err))
		return nil, false
	}
	if err := cur.save(ctx, c, next); err != nil {
		t.fail(err)
	}
	return objs, true
}

func (c *Compactor) isOrphan(ctx context.Context, obj *blob.ListObject) (bool, error) {
	if obj.IsDir || c.age(obj.ModTime) < c.cfg.OrphanGrace {
		return false, nil
	}
	id, ok := c.ledgerOfSegment(obj.Key)
	if !ok {
		return false, nil // not ours: never delete what we cannot name
	}
	m, err := c.deps.Catalog.GetLedger(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("orphan sweep: read ledger %d: %w", id, err)
	}
	switch m.State {
	case catalog.LedgerOffloaded:
		// Includes a segment replaced by a compacted one: readers that
		// still had the old Location had OrphanGrace to finish.
		return m.Location != obj.Key, nil
	case catalog.LedgerDeleted:
		return m.Location != obj.Key && c.segmentKey(m) != obj.Key, nil
	default:
		return c.segmentKey(m) != obj.Key, nil
	}
}
