package bookie

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
	"github.com/sluicemq/sluice/bookkeeper/storage"
)

// Draining (decommissioning; bookkeeper/DESIGN.md "Decommission").
//
// A draining bookie refuses normal adds (ErrReadOnly: its writers replace
// it in their ensembles at their next add) but still takes recovery adds
// and serves every read, and says so in its heartbeat; the compactor then
// moves every sealed ledger's copies off it at once, reading from it and
// the other replicas, until no ledger names it. The state belongs to the
// bookie and survives restarts: it is the file DrainFile in the journal
// directory, next to the cookie, written atomically (temporary file, sync,
// rename, directory sync) and removed (then the directory synced) when
// draining is cancelled. The file:
//
//	sluice-bookie-draining
//	version=1
//	since_ms=<Unix milliseconds when draining began>
//	crc32c=<8 hex digits: CRC-32C of the lines above, newlines included>
//
// A file that is not exactly that is corruption: Open refuses to start
// (ErrCorrupt, naming the file) rather than guess whether to drain.

// DrainFile is the draining marker's name in the journal directory.
const DrainFile = "DRAINING"

const (
	drainMagic   = "sluice-bookie-draining"
	drainVersion = 1
	maxDrainSize = 4 << 10
	drainCRC     = "crc32c="
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeDrain returns the marker file's bytes for draining since since.
func encodeDrain(since time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nversion=%d\nsince_ms=%d\n", drainMagic, drainVersion, since.UnixMilli())
	fmt.Fprintf(&b, "%s%08x\n", drainCRC, crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// decodeDrain parses the marker file; anything else is storage.ErrCorrupt.
func decodeDrain(b []byte) (time.Time, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: draining marker: %s", storage.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) > maxDrainSize {
		return time.Time{}, corrupt("%d bytes", len(b))
	}
	i := bytes.LastIndex(b, []byte("\n"+drainCRC))
	if i < 0 {
		return time.Time{}, corrupt("no checksum line")
	}
	body, tail := b[:i+1], string(b[i+1+len(drainCRC):])
	if want := fmt.Sprintf("%08x\n", crc32.Checksum(body, castagnoli)); tail != want {
		return time.Time{}, corrupt("checksum line %q, computed %q", tail, want)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 3 || lines[0] != drainMagic {
		return time.Time{}, corrupt("%d lines, first %q", len(lines), lines[0])
	}
	if lines[1] != fmt.Sprintf("version=%d", drainVersion) {
		return time.Time{}, corrupt("%q; this build reads version %d", lines[1], drainVersion)
	}
	v, ok := strings.CutPrefix(lines[2], "since_ms=")
	ms, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil || ms <= 0 {
		return time.Time{}, corrupt("line %q, want since_ms=<positive integer>", lines[2])
	}
	return time.UnixMilli(ms), nil
}

// readDrain reads dir's marker: the zero time when there is none.
func readDrain(fs vfs.FS, dir string) (time.Time, error) {
	name := fs.PathJoin(dir, DrainFile)
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDrainSize+1))
	if err != nil {
		return time.Time{}, fmt.Errorf("read %s: %w", name, err)
	}
	since, err := decodeDrain(b)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w (delete it to stop draining, or write it again with SetDraining)", name, err)
	}
	return since, nil
}

// Draining reports since when the bookie is draining (ok false: it is not).
func (b *Bookie) Draining() (since time.Time, ok bool) {
	ms := b.drainingMs.Load()
	return time.UnixMilli(ms), ms != 0
}

// SetDraining starts (on) or cancels draining, durably: when it returns
// nil, a restart keeps the new state. Starting again keeps the original
// start time; cancelling a bookie that is not draining is a no-op.
func (b *Bookie) SetDraining(on bool) error {
	if err := b.err(); err != nil {
		return err
	}
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	_, was := b.Draining()
	switch {
	case on == was:
		return nil
	case on:
		now := time.Now()
		if err := durable.WriteFileAtomic(b.cfg.FS, b.cfg.JournalDir, DrainFile, encodeDrain(now)); err != nil {
			return fmt.Errorf("start draining: %w", err)
		}
		b.drainingMs.Store(now.UnixMilli())
		b.log.Warn("bookie draining: it takes no new entries; the compactor moves its ledgers' copies to other bookies")
	default:
		name := b.cfg.FS.PathJoin(b.cfg.JournalDir, DrainFile)
		if err := b.cfg.FS.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stop draining: remove %s: %w", name, err)
		}
		if err := durable.SyncDir(b.cfg.FS, b.cfg.JournalDir); err != nil {
			return fmt.Errorf("stop draining: %w", err)
		}
		b.drainingMs.Store(0)
		b.log.Info("bookie draining cancelled: it takes new entries again", slog.Bool("read_only", b.ReadOnly()))
	}
	select {
	case b.beatKick <- struct{}{}:
	default:
	}
	return nil
}
