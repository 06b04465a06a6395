package volatilefs

// The namespace model: directory entries that die with the power.
//
// A file's bytes survive a power cut once the file is fsynced; its name
// survives once its directory is fsynced. Creations, renames, removals and
// links done since the directory's last sync may each be lost. A process
// kill cannot lose them (the kernel already applied them), so with an undo
// directory (Open) the FS makes the loss happen at the next start instead:
//
//   - Before each namespace operation it appends an undo record to
//     UNDO/undo.log and fsyncs it (write-ahead), after hard-linking to
//     UNDO/ whatever file the operation replaces or removes.
//   - Syncing a directory (OpenDir(d).Sync()) marks every record so far
//     whose entries lie in d as durable, once every directory the record
//     touches has been synced since; durable records and their links are
//     dropped, and the log starts afresh when none is pending.
//   - Open, run by the next process before anything else, reverts the
//     records still pending, newest first — the worst a power cut can do —
//     then empties UNDO.
//
// Each undo step first checks that its operation happened (a crash may
// fall between the log record and the operation). Directories themselves
// (MkdirAll, RemoveAll, removing a directory) are taken as durable at
// once, as is the LOCK file pebble creates.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// undoLogName is the undo log in the undo directory; backups are named
// "b-SEQ" beside it.
const undoLogName = "undo.log"

// nsRecord is one line of the undo log. Op is "create", "rename",
// "remove" or "link" for an operation (Seq, A, B, Backup), "sync" when
// directory Dir became durable up to Seq, "void" when operation Seq
// failed (so it never happened), "undone" when Recover reverted operation
// Seq (so a Recover cut short by a kill never reverts it twice: undoing a
// create twice would remove what undoing an older remove put back).
type nsRecord struct {
	Seq    uint64 `json:"seq"`
	Op     string `json:"op"`
	A      string `json:"a,omitempty"`
	B      string `json:"b,omitempty"`
	Backup string `json:"backup,omitempty"`
	Dir    string `json:"dir,omitempty"`

	dirs []string // directories not yet synced since (runtime only)
}

// namespace is the FS's undo state; mu serializes every logged operation
// with its record.
type namespace struct {
	under vfs.FS
	dir   string

	mu      sync.Mutex
	log     vfs.File
	seq     uint64      // last record's sequence (guarded by mu)
	pending []*nsRecord // operations not yet durable, in order (guarded by mu)
}

// Open returns an FS over under that also models lost directory entries,
// keeping its undo state in undoDir (created if missing; on the same
// filesystem as the files, since backups are hard links). It first
// reverts what the previous process's unsynced namespace operations did.
func Open(under vfs.FS, undoDir string) (*FS, error) {
	reverted, err := Recover(under, undoDir)
	if err != nil {
		return nil, err
	}
	log, err := under.Create(filepath.Join(undoDir, undoLogName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("volatilefs: create undo log: %w", err)
	}
	fs := New(under)
	fs.ns = &namespace{under: under, dir: undoDir, log: log}
	fs.Reverted = reverted
	return fs, nil
}

// Recover reverts the namespace operations recorded in undoDir that no
// directory sync made durable, newest first, empties undoDir, and returns
// how many it reverted. A torn last line (the crash hit its append, so its
// operation never ran) ends the log.
func Recover(under vfs.FS, undoDir string) (int, error) {
	recs, err := readUndoLog(under, undoDir)
	if err != nil {
		return 0, err
	}
	pending := replayUndoLog(recs)
	if len(pending) > 0 {
		// The log's whole lines again (a torn tail dropped), swapped in
		// atomically, then the "undone" records after them.
		path := filepath.Join(undoDir, undoLogName)
		log, err := under.Create(path+".tmp", vfs.WriteCategoryUnspecified)
		if err != nil {
			return 0, fmt.Errorf("volatilefs: rewrite undo log: %w", err)
		}
		defer func() { _ = log.Close() }()
		ns := &namespace{under: under, dir: undoDir, log: log}
		for i := range recs {
			if err := ns.append(&recs[i]); err != nil {
				return 0, err
			}
		}
		if err := under.Rename(path+".tmp", path); err != nil {
			return 0, fmt.Errorf("volatilefs: rewrite undo log: %w", err)
		}
		for i := len(pending) - 1; i >= 0; i-- {
			if err := undo(under, pending[i]); err != nil {
				return 0, fmt.Errorf("volatilefs: revert %s %s: %w", pending[i].Op, pending[i].A, err)
			}
			if err := ns.append(&nsRecord{Seq: pending[i].Seq, Op: "undone"}); err != nil {
				return 0, err
			}
		}
	}
	if err := under.RemoveAll(undoDir); err != nil {
		return 0, fmt.Errorf("volatilefs: empty undo dir: %w", err)
	}
	return len(pending), under.MkdirAll(undoDir, 0o755)
}

func readUndoLog(under vfs.FS, undoDir string) ([]nsRecord, error) {
	f, err := under.Open(filepath.Join(undoDir, undoLogName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volatilefs: open undo log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var recs []nsRecord
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return recs, nil // an unterminated line is a torn append
		}
		if err != nil {
			return nil, fmt.Errorf("volatilefs: read undo log: %w", err)
		}
		var rec nsRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("volatilefs: undo log line %q: %w", line, err)
		}
		recs = append(recs, rec)
	}
}

// replayUndoLog returns the operations of recs that stayed pending.
func replayUndoLog(recs []nsRecord) []*nsRecord {
	var pending []*nsRecord
	for i := range recs {
		switch rec := &recs[i]; rec.Op {
		case "sync":
			pending = synced(pending, rec.Dir, rec.Seq, nil)
		case "void", "undone":
			pending = slices.DeleteFunc(pending, func(p *nsRecord) bool { return p.Seq == rec.Seq })
		default:
			rec.dirs = rec.touched()
			pending = append(pending, rec)
		}
	}
	return pending
}

// synced marks dir synced for the pending records up to seq and returns
// those still pending; durable is called with each record that became so.
func synced(pending []*nsRecord, dir string, seq uint64, durable func(*nsRecord)) []*nsRecord {
	return slices.DeleteFunc(pending, func(p *nsRecord) bool {
		if p.Seq > seq {
			return false
		}
		p.dirs = slices.DeleteFunc(p.dirs, func(d string) bool { return d == dir })
		if len(p.dirs) > 0 {
			return false
		}
		if durable != nil {
			durable(p)
		}
		return true
	})
}

// touched lists the directories whose entries the operation changes.
func (r *nsRecord) touched() []string {
	if r.Op == "link" {
		return []string{filepath.Dir(r.B)} // A's entry is unchanged
	}
	dirs := []string{filepath.Dir(r.A)}
	if r.B != "" && filepath.Dir(r.B) != dirs[0] {
		dirs = append(dirs, filepath.Dir(r.B))
	}
	return dirs
}

func exists(under vfs.FS, name string) bool {
	_, err := under.Stat(name)
	return err == nil
}

// ignoreMissing drops "no such file": an undo step whose file a later,
// durable removal of its directory took away.
func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// undo reverts one operation if it happened. Each step is idempotent: a
// kill between a step and its "undone" record runs the step again.
func undo(under vfs.FS, r *nsRecord) error {
	switch r.Op {
	case "create", "link": // A created / B linked, replacing Backup's file if any
		name := r.A
		if r.Op == "link" {
			name = r.B
		}
		if r.Backup == "" {
			return ignoreMissing(under.Remove(name))
		}
		if !exists(under, r.Backup) {
			return nil // already put back
		}
		if err := ignoreMissing(under.Remove(name)); err != nil {
			return err
		}
		return under.Rename(r.Backup, name)
	case "rename": // A renamed to B, replacing Backup's file if any
		if !exists(under, r.A) {
			if err := ignoreMissing(under.Rename(r.B, r.A)); err != nil {
				return err
			}
		}
		// Never ran, half undone or undone: B gets back what it was.
		if r.Backup != "" && exists(under, r.Backup) {
			return under.Rename(r.Backup, r.B)
		}
	case "remove": // A removed; Backup is its file
		if exists(under, r.A) {
			return nil // it never ran, or it is undone
		}
		return ignoreMissing(under.Rename(r.Backup, r.A))
	default:
		return fmt.Errorf("unknown undo record %q", r.Op)
	}
	return nil
}

// record logs op (a, b) durably before it runs, hard-linking the file at
// keep (the one the operation replaces or removes, if any) to a backup
// first. The caller holds ns.mu, runs the operation, and calls done with
// its error.
func (ns *namespace) record(op, a, b, keep string) (done func(error) error, err error) {
	ns.seq++
	rec := &nsRecord{Seq: ns.seq, Op: op, A: a, B: b}
	if keep != "" {
		if fi, err := ns.under.Stat(keep); err == nil && !fi.IsDir() {
			rec.Backup = filepath.Join(ns.dir, "b-"+strconv.FormatUint(rec.Seq, 10))
			if err := ns.under.Link(keep, rec.Backup); err != nil {
				return nil, fmt.Errorf("volatilefs: back up %s: %w", keep, err)
			}
		}
	}
	if err := ns.append(rec); err != nil {
		return nil, err
	}
	rec.dirs = rec.touched()
	return func(opErr error) error {
		if opErr == nil {
			ns.pending = append(ns.pending, rec)
			return nil
		}
		// It failed, so it never happened: say so before anything else
		// can be logged, or the next start would revert it.
		return errors.Join(opErr, ns.append(&nsRecord{Seq: rec.Seq, Op: "void"}), ns.drop(rec))
	}, nil
}

func (ns *namespace) append(rec *nsRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := ns.log.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("volatilefs: append to undo log: %w", err)
	}
	if err := ns.log.Sync(); err != nil {
		return fmt.Errorf("volatilefs: sync undo log: %w", err)
	}
	return nil
}

// drop removes a record's backup (the record is durable or void).
func (ns *namespace) drop(rec *nsRecord) error {
	if rec.Backup == "" {
		return nil
	}
	return ignoreMissing(ns.under.Remove(rec.Backup))
}

// dirSynced records that dir was synced after every record up to seq.
func (ns *namespace) dirSynced(dir string, seq uint64) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var durable []*nsRecord
	ns.pending = synced(ns.pending, dir, seq, func(r *nsRecord) { durable = append(durable, r) })
	// The log says so before the backups go: a kill in between must not
	// leave a pending record whose backup is gone.
	var err error
	if len(ns.pending) == 0 && ns.seq > 0 {
		// Nothing to revert: start the log afresh so it stays short.
		err = ns.log.Close()
		log, cerr := ns.under.Create(filepath.Join(ns.dir, undoLogName), vfs.WriteCategoryUnspecified)
		if cerr == nil {
			ns.log = log
		}
		err = errors.Join(err, cerr)
	} else {
		err = ns.append(&nsRecord{Seq: seq, Op: "sync", Dir: dir})
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range durable {
		errs = append(errs, ns.drop(r))
	}
	return errors.Join(errs...)
}

// lastSeq is the sequence of the last record logged.
func (ns *namespace) lastSeq() uint64 {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.seq
}

// logged runs op on the real filesystem as a logged namespace operation:
// kind over (a, b), backing up keep first. Without an undo directory it
// just runs op.
func (fs *FS) logged(kind, a, b, keep string, op func() error) error {
	ns := fs.ns
	if ns == nil {
		return op()
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	done, err := ns.record(kind, key(a), cleanOrEmpty(b), cleanOrEmpty(keep))
	if err != nil {
		return err
	}
	return done(op())
}

func cleanOrEmpty(name string) string {
	if name == "" {
		return ""
	}
	return key(name)
}

// dirFile is a directory handle whose Sync makes the directory's logged
// operations durable.
type dirFile struct {
	vfs.File
	fs  *FS
	dir string
}

func (d *dirFile) Sync() error {
	seq := d.fs.ns.lastSeq() // records after this may race the sync
	if err := d.File.Sync(); err != nil {
		return err
	}
	return d.fs.ns.dirSynced(d.dir, seq)
}

func (d *dirFile) SyncData() error { return d.Sync() }

func (d *dirFile) SyncTo(int64) (bool, error) { return true, d.Sync() }

// OpenDir implements vfs.FS.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil || fs.ns == nil {
		return f, err
	}
	return &dirFile{File: f, fs: fs, dir: key(name)}, nil
}
