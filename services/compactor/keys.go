package compactor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Object key layout, under Config.Prefix:
//
//	segments/<topic id>/<partition>/<ledger id, 20 digits>.seg   a ledger's segment
//	segments/<topic id>/<partition>/<ledger id>.c<gen>.seg       its gen-th compacted rewrite
//	pending/<ledger id, 20 digits>                               a pending marker (pending.go)
//	state/{sweep,offload,purge,pending}-cursor                   where listings that span passes go on
//
// A ledger's segment key is a pure function of the ledger, so a pass that
// redoes an offload after a crash writes (or finds) the same object rather
// than a second one, and every step can name the object without having
// read the catalog's Location. Ledger ids are zero-padded so listings come
// in id order.
const (
	segmentsDir      = "segments/"
	pendingDir       = "pending/"
	sweepCursorKey   = "state/sweep-cursor"
	offloadCursorKey = "state/offload-cursor"
	purgeCursorKey   = "state/purge-cursor"
	pendingCursorKey = "state/pending-cursor"
	// rereplicateCursorKey: where the re-replication scan of CLOSED
	// ledgers goes on.
	rereplicateCursorKey = "state/rereplicate-cursor"
	segmentExt           = ".seg"
)

// segmentKey is the object key of ledger m's segment.
func (c *Compactor) segmentKey(m catalog.LedgerMetadata) string {
	return fmt.Sprintf("%s%s%s/%d/%020d%s", c.cfg.Prefix, segmentsDir, m.TopicID, m.Partition, int64(m.ID), segmentExt)
}

// compactedKey is the key of ledger m's next compacted segment: the
// generation after the one its Location names.
func (c *Compactor) compactedKey(m catalog.LedgerMetadata) string {
	gen := 0
	if i := strings.LastIndex(m.Location, ".c"); i >= 0 {
		if g, err := strconv.Atoi(strings.TrimSuffix(m.Location[i+2:], segmentExt)); err == nil {
			gen = g
		}
	}
	return fmt.Sprintf("%s%s%s/%d/%020d.c%d%s", c.cfg.Prefix, segmentsDir, m.TopicID, m.Partition, int64(m.ID), gen+1, segmentExt)
}

// pendingKey is the object key of ledger id's pending marker.
func (c *Compactor) pendingKey(id catalog.LedgerID) string {
	return fmt.Sprintf("%s%s%020d", c.cfg.Prefix, pendingDir, int64(id))
}

// ledgerOfSegment parses the ledger id out of a segment key; ok is false
// for a key that is not one.
func (c *Compactor) ledgerOfSegment(key string) (catalog.LedgerID, bool) {
	rest, ok := strings.CutPrefix(key, c.cfg.Prefix+segmentsDir)
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return 0, false
	}
	name, ok := strings.CutSuffix(rest[i+1:], segmentExt)
	if !ok {
		return 0, false
	}
	name, _, _ = strings.Cut(name, ".") // a compacted generation
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return catalog.LedgerID(id), true
}

// ledgerOfPending parses the ledger id out of a pending marker key.
func (c *Compactor) ledgerOfPending(key string) (catalog.LedgerID, bool) {
	name, ok := strings.CutPrefix(key, c.cfg.Prefix+pendingDir)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return catalog.LedgerID(id), true
}
