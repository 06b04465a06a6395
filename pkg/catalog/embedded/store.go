package embedded

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"

	"github.com/sluicemq/sluice/pkg/pebblelog"
)

// storeFormat is written under formatKey when a store is created. A store
// with another format is refused rather than misread.
const storeFormat = 1

// Options configures Open. The zero value is valid.
type Options struct {
	// FS is the filesystem under the store; default vfs.Default. Tests use
	// vfs.NewCrashableMem to crash the store and keep only synced data.
	FS vfs.FS
	// Logger receives Pebble's messages (Info as Debug); default discards
	// them, so a quiet store stays quiet.
	Logger *slog.Logger
	// Clock is read for heartbeat expiry and timestamps; default the wall clock.
	Clock catalog.Clock
}

// store is the embedded catalog's driver: Pebble under a mutex. Open wraps
// it in a *catalog.Catalog, which checks every argument before a method
// here runs; these methods only read, apply the catalog's rules to what
// they read, and write. Safe for concurrent use.
type store struct {
	// mu makes each operation's read-check-write atomic: writers hold it
	// exclusively from their first read to their batch's commit.
	mu    sync.RWMutex
	db    *pebble.DB
	clock catalog.Clock
}

var _ catalog.Driver = (*store)(nil)

// Open opens (creating if needed) the catalog stored in dir. Close the
// catalog when done.
func Open(dir string, opts Options) (*catalog.Catalog, error) {
	c, err := open(dir, opts)
	if err != nil {
		return nil, err
	}
	return catalog.New(c), nil
}

// open opens the driver alone; Open is what callers get.
func open(dir string, opts Options) (*store, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = catalog.SystemClock{}
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: opts.FS, Logger: pebblelog.New(opts.Logger)})
	if err != nil {
		return nil, fmt.Errorf("open embedded catalog %s: %w", dir, err)
	}
	c := &store{db: db, clock: opts.Clock}
	if err := c.checkFormat(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open embedded catalog %s: %w", dir, err)
	}
	return c, nil
}

// checkFormat stamps a new store with storeFormat, or checks an old one's.
func (c *store) checkFormat() error {
	var f formatRec
	found, err := c.get(formatKey, &f)
	if err != nil {
		return err
	}
	if found {
		if f.Format != storeFormat {
			return fmt.Errorf("store format %d, this build reads %d", f.Format, storeFormat)
		}
		return nil
	}
	it, err := c.db.NewIter(nil)
	if err != nil {
		return err
	}
	empty := !it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if !empty {
		return fmt.Errorf("%w: data without a format record", ErrCorrupt)
	}
	b := c.db.NewBatch()
	set(b, formatKey, formatRec{Format: storeFormat})
	return c.commit(b)
}

// ErrClosed is returned by calls on a closed catalog.
var ErrClosed = errors.New("embedded catalog: closed")

// Close closes the store. Calls after Close return ErrClosed.
func (c *store) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == nil {
		return ErrClosed
	}
	err := c.db.Close()
	c.db = nil
	return err
}

// write runs f holding the lock exclusively: f's reads, checks and batch
// commit are one atomic step.
func (c *store) write(f func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == nil {
		return ErrClosed
	}
	return f()
}

// read runs f under the shared lock, so a multi-key read sees no write half done.
func (c *store) read(f func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.db == nil {
		return ErrClosed
	}
	return f()
}

// now is the clock's time at the catalog's millisecond precision.
func (c *store) now() time.Time { return catalog.Timestamp(c.clock.Now()) }

// get reads key into rec; found is false if the key does not exist.
func (c *store) get(key []byte, rec any) (found bool, err error) {
	v, closer, err := c.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %q: %w", key, err)
	}
	defer closer.Close()
	return true, decodeValue(key, v, rec)
}

// commit applies b durably (fsync) before returning.
func (c *store) commit(b *pebble.Batch) error {
	defer b.Close()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func set(b *pebble.Batch, key []byte, rec any) { _ = b.Set(key, encodeValue(rec), nil) }

// scan visits keys with prefix after the page token's position, at most
// limit of them, and returns the token for the next page ("" when no key
// with the prefix follows).
func (c *store) scan(prefix []byte, token string, limit int, visit func(key, value []byte) error) (next string, err error) {
	start, err := decodeToken(prefix, token)
	if err != nil {
		return "", err
	}
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return "", err
	}
	defer it.Close()
	n := 0
	var last []byte
	for ok := it.SeekGE(start); ok; ok = it.Next() {
		if token != "" && n == 0 && string(it.Key()) == string(start) {
			continue // the previous page's last key
		}
		if n == limit {
			return encodeToken(last), nil
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return "", err
		}
		if err := visit(it.Key(), v); err != nil {
			return "", err
		}
		last = append(last[:0], it.Key()...)
		n++
	}
	return "", it.Error()
}

// Page tokens are the last returned key, base64url: opaque to callers, and
// checked to belong to the listing they are handed back to.
func encodeToken(key []byte) string { return base64.RawURLEncoding.EncodeToString(key) }

func decodeToken(prefix []byte, token string) ([]byte, error) {
	if token == "" {
		return prefix, nil
	}
	if len(token) > catalog.MaxPageTokenLength {
		return nil, catalog.Invalid("pageToken", "is %d bytes, more than %d", len(token), catalog.MaxPageTokenLength)
	}
	key, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(key) <= len(prefix) || string(key[:len(prefix)]) != string(prefix) {
		return nil, catalog.Invalid("pageToken", "is not a token of this listing")
	}
	return key, nil
}

// notFound maps Pebble's not-found to the catalog's and wraps other errors.
func notFound(err error) error {
	if errors.Is(err, pebble.ErrNotFound) {
		return catalog.ErrNotFound
	}
	return fmt.Errorf("read: %w", err)
}
