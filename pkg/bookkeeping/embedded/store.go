package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/bookkeeping"

	"github.com/sluicemq/sluice/pkg/pebblelog"
)

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("embedded bookkeeping: store is closed")

// store is the embedded bookkeeping's driver: one Pebble database. Open
// wraps it in a *bookkeeping.Store, which checks every argument before a
// method here runs; these methods only read, decide on what they read, and
// write. It is safe for concurrent use; only one store may have a directory
// open at a time (Pebble locks it).
type store struct {
	db  *pebble.DB
	now func() time.Time

	// mu serializes writers, so a compare-and-set's read, decision and
	// synced write are one atomic step; readers share it so they never see
	// half of a decision (e.g. a lease and its owner's liveness).
	mu     sync.RWMutex
	closed bool // guarded by mu
}

var _ bookkeeping.Driver = (*store)(nil)

type options struct {
	fs     vfs.FS
	now    func() time.Time
	logger *slog.Logger
}

// Option configures Open.
type Option func(*options)

// WithFS stores the database on fs instead of the OS filesystem (tests use
// vfs.NewMem or vfs.NewCrashableMem).
func WithFS(fs vfs.FS) Option { return func(o *options) { o.fs = fs } }

// WithClock makes the store judge member expiry by now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger receives Pebble's messages: its chatter at Debug, its errors at
// Error. Without it they are discarded.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Open opens (creating if needed) the store in dir. Close it when done.
func Open(dir string, opts ...Option) (*bookkeeping.Store, error) {
	s, err := openStore(dir, opts...)
	if err != nil {
		return nil, err
	}
	return bookkeeping.New(s), nil
}

// openStore opens the driver alone; Open is what callers get.
func openStore(dir string, opts ...Option) (*store, error) {
	o := options{fs: vfs.Default, now: time.Now, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case dir == "":
		return nil, &bookkeeping.ValidationError{Field: "dir", Reason: "must not be empty"}
	case o.fs == nil:
		return nil, &bookkeeping.ValidationError{Field: "fs", Reason: "must not be nil"}
	case o.now == nil:
		return nil, &bookkeeping.ValidationError{Field: "clock", Reason: "must not be nil"}
	case o.logger == nil:
		return nil, &bookkeeping.ValidationError{Field: "logger", Reason: "must not be nil"}
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: o.fs, Logger: pebblelog.New(o.logger)})
	if err != nil {
		return nil, fmt.Errorf("embedded bookkeeping: open %s: %w", dir, err)
	}
	s := &store{db: db, now: o.now}
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded bookkeeping: open %s: %w", dir, err)
	}
	return s, nil
}

// checkFormat writes the format record into a new store, upgrades a store of
// an older format and refuses a store of a newer one.
func (s *store) checkFormat() error {
	v, err := s.get(formatKey)
	if err != nil {
		return err
	}
	if v == nil {
		empty, err := s.isEmpty()
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("%w: records without a format record", ErrCorrupt)
		}
		return s.db.Set(formatKey, formatRecord{version: storeFormat}.encode(), pebble.Sync)
	}
	r, err := decodeFormat(v)
	if err != nil {
		return err
	}
	switch r.version {
	case storeFormat:
		return nil
	case 1:
		return s.upgradeFromFormat1()
	case 2, 3:
		// Formats 3 and 4 only allow newer record versions (partition
		// records of version 2, transactional id records of version 2);
		// the older records of a format-2 or format-3 store are read as
		// they are.
		return s.db.Set(formatKey, formatRecord{version: storeFormat}.encode(), pebble.Sync)
	}
	return fmt.Errorf("store format %d, this binary reads formats 1 to %d", r.version, storeFormat)
}

// upgradeFromFormat1 brings a format-1 store (no group records) to the
// current format: a group record for every group with a member record or a
// partition record, and the new format record, in one synced batch — a
// crash leaves format 1, upgraded again by the next Open, or the current
// format (formats 3 and 4 add nothing to rewrite, see storeFormat). A group whose
// members all left before the upgrade and that has no partition records
// left no trace to find, so ListGroups misses it until it is used again.
func (s *store) upgradeFromFormat1() error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, prefix := range []byte{prefixMember, prefixPartition} {
		err := s.eachGroup(prefix, func(group string) error { return recordGroup(b, group) })
		if err != nil {
			return fmt.Errorf("upgrade from format 1: %w", err)
		}
	}
	if err := b.Set(formatKey, formatRecord{version: storeFormat}.encode(), nil); err != nil {
		return err
	}
	if err := commit(b); err != nil {
		return fmt.Errorf("upgrade from format 1: %w", err)
	}
	return nil
}

// eachGroup calls f once with every group that has keys under prefix (member
// or partition keys: prefix, group, NUL, …), in order, seeking past each
// group's keys instead of reading them.
func (s *store) eachGroup(prefix byte, f func(group string) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; {
		k := it.Key()
		end := bytes.IndexByte(k, 0)
		if end < 2 {
			return errors.Join(fmt.Errorf("%w: malformed key %q", ErrCorrupt, k), it.Close())
		}
		group := string(k[1:end])
		if err := f(group); err != nil {
			return errors.Join(err, it.Close())
		}
		// Every key of group starts with prefix, group, NUL; names hold no
		// control characters, so prefix, group, 0x01 is past all of them
		// and before the next group.
		ok = it.SeekGE(append(append([]byte{prefix}, group...), 1))
	}
	return errors.Join(it.Error(), it.Close())
}

func (s *store) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, errors.Join(it.Error(), it.Close())
}

// Close closes the database. Calls after Close return ErrClosed.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}

// lock takes the writer lock; the caller must call the returned unlock.
func (s *store) lock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	return s.mu.Unlock, nil
}

// rlock takes the reader lock; the caller must call the returned unlock.
func (s *store) rlock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	return s.mu.RUnlock, nil
}

// get returns a copy of the value at key, or nil when there is none.
func (s *store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	// Non-nil even when empty: an empty value is a (corrupt) value, not
	// a missing key.
	return append(make([]byte, 0, len(v)), v...), nil
}

// scan calls f with every key and value in [lower, upper) in order until f
// returns false. k and v are only valid during the call.
func (s *store) scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(err, it.Close())
		}
		more, err := f(it.Key(), v)
		if err != nil || !more {
			return errors.Join(err, it.Close())
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// commit applies b durably. The caller still closes b.
func commit(b *pebble.Batch) error { return b.Commit(pebble.Sync) }

// syncWrite makes every single-key write durable before the call returns.
var syncWrite = pebble.Sync
