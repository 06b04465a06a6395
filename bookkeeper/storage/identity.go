package storage

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"

	"github.com/sluicemq/sluice/pkg/pebblelog"
)

// openIdentity checks the cookies of both directories against each other,
// against o's identity and against the index, opens the index, and
// formats a new storage when nothing was ever stored. See "Cookies and
// identity" in the package doc for the rules. On success the index is
// open; the caller closes it.
func openIdentity(o Options, log *slog.Logger) (*pebble.DB, [storageIDSize]byte, Cookie, error) {
	var id [storageIDSize]byte
	want := Cookie{BookieID: o.BookieID, InstanceID: o.InstanceID, LedgerDir: o.Dir, IndexDir: o.IndexDir}
	lc, lMissing, err := readRoleCookie(o, o.Dir, RoleLedgers, want)
	if err != nil {
		return nil, id, Cookie{}, err
	}
	ic, iMissing, err := readRoleCookie(o, o.IndexDir, RoleIndex, want)
	if err != nil {
		return nil, id, Cookie{}, err
	}
	if !lMissing && !iMissing && lc.StorageID != ic.StorageID {
		return nil, id, Cookie{}, fmt.Errorf("%w: ledger dir %s belongs to storage %s but index dir %s to storage %s: "+
			"directories of different installs are mounted together", ErrCookieMismatch, o.Dir, lc.StorageID, o.IndexDir, ic.StorageID)
	}
	ledgerData, err := hasEntryLogs(o)
	if err != nil {
		return nil, id, Cookie{}, err
	}
	db, err := openIndex(o, log)
	if err != nil {
		return nil, id, Cookie{}, err
	}
	fail := func(err error) (*pebble.DB, [storageIDSize]byte, Cookie, error) {
		if db != nil {
			err = errors.Join(err, db.Close())
		}
		return nil, id, Cookie{}, err
	}
	var fr formatRecord
	var indexData bool
	if db != nil {
		var found bool
		if fr, found, indexData, err = readFormatRecord(db); err != nil {
			return fail(fmt.Errorf("index in %s: %w", o.IndexDir, err))
		}
		if !found { // the index only appears once its format record is in it
			return fail(fmt.Errorf("index in %s: %w", o.IndexDir, corruptf("no format record")))
		}
	}

	if !lMissing {
		// The ledger dir's cookie is written last: formatting finished.
		if iMissing {
			return fail(fmt.Errorf("%w: index dir %s has no cookie but ledger dir %s has one (storage %s): "+
				"the index disk was wiped or replaced, and with it the index of every entry this bookie stored", ErrCookieMissing, o.IndexDir, o.Dir, lc.StorageID))
		}
		if db == nil {
			return fail(fmt.Errorf("%w: index dir %s has its cookie (storage %s) but no index: the index was deleted; "+
				"the entries this bookie stored can no longer be found", ErrDataLoss, o.IndexDir, lc.StorageID))
		}
		if got := formatStorageID(fr.storageID); got != lc.StorageID {
			return fail(fmt.Errorf("%w: the index in %s belongs to storage %s, the cookies to storage %s: "+
				"the index was replaced by another install's", ErrCookieMismatch, o.IndexDir, got, lc.StorageID))
		}
		id = fr.storageID
	} else {
		switch {
		case ledgerData:
			return fail(fmt.Errorf("%w: ledger dir %s holds entry logs but no cookie: the cookie was deleted, or the "+
				"directory comes from another install; refusing to adopt data of unknown origin", ErrCookieMissing, o.Dir))
		case indexData:
			return fail(fmt.Errorf("%w: ledger dir %s has no cookie but the index in %s holds ledger data: "+
				"the ledger disk was wiped or replaced, and the entries on it are lost", ErrCookieMissing, o.Dir, o.IndexDir))
		case o.RequireStorageID != "":
			return fail(fmt.Errorf("%w: this bookie is registered with storage %s, but %s and %s hold no storage: "+
				"the disks were wiped; the bookie must not serve as if it never had its ledgers", ErrCookieMissing, o.RequireStorageID, o.Dir, o.IndexDir))
		}
		// Nothing was ever stored: a new storage, or one whose formatting
		// a crash interrupted. Finish it, keeping whatever id it got.
		switch {
		case db != nil:
			id = fr.storageID
			if !iMissing && ic.StorageID != formatStorageID(id) {
				return fail(fmt.Errorf("%w: index dir %s cookie names storage %s, its index %s", ErrCookieMismatch, o.IndexDir, ic.StorageID, formatStorageID(id)))
			}
		case !iMissing:
			if id, err = parseStorageID(ic.StorageID); err != nil {
				return fail(fmt.Errorf("cookie in %s: %w", o.IndexDir, corruptf("%v", err)))
			}
		default:
			if id, err = newStorageID(); err != nil {
				return fail(fmt.Errorf("new storage id: %w", err))
			}
		}
		if db, err = format(o, log, db, want, id, iMissing); err != nil {
			return fail(err)
		}
		log.Info("storage formatted", slog.String("storage_id", formatStorageID(id)), slog.String("dir", o.Dir), slog.String("index_dir", o.IndexDir))
	}
	if o.RequireStorageID != "" && formatStorageID(id) != o.RequireStorageID {
		return fail(fmt.Errorf("%w: %s and %s hold storage %s, but this bookie is registered with storage %s: "+
			"disks of another install are mounted here", ErrCookieMismatch, o.Dir, o.IndexDir, formatStorageID(id), o.RequireStorageID))
	}
	cookie := want
	cookie.StorageID, cookie.Role = formatStorageID(id), RoleLedgers
	return db, id, cookie, nil
}

// format writes what a new storage needs, in an order that lets a crash
// anywhere be finished by the next Open: the index dir's cookie, the index
// (created whole, see createIndex), and last the ledger dir's cookie,
// whose presence means formatting completed. db is the index if it exists
// already; format returns it open.
func format(o Options, log *slog.Logger, db *pebble.DB, want Cookie, id [storageIDSize]byte, writeIndexCookie bool) (*pebble.DB, error) {
	want.StorageID = formatStorageID(id)
	if writeIndexCookie {
		c := want
		c.Role = RoleIndex
		if err := WriteCookie(o.FS, o.IndexDir, c); err != nil {
			return db, err
		}
	}
	if db == nil {
		if err := createIndex(o, log, id); err != nil {
			return nil, err
		}
		var err error
		if db, err = openIndex(o, log); err != nil {
			return nil, err
		}
		if db == nil {
			return nil, fmt.Errorf("index in %s vanished after its creation", o.IndexDir)
		}
	}
	c := want
	c.Role = RoleLedgers
	return db, WriteCookie(o.FS, o.Dir, c)
}

const pebbleTmpSubdir = pebbleSubdir + tmpSuffix

func pebbleOptions(o Options, log *slog.Logger) *pebble.Options {
	return &pebble.Options{FS: o.FS, Logger: pebblelog.New(log), ErrorIfNotExists: true}
}

// openIndex opens the index, or returns nil if there is none. It never
// creates one: a missing index must be told apart from an empty one.
// Leftovers of an interrupted createIndex are removed.
func openIndex(o Options, log *slog.Logger) (*pebble.DB, error) {
	fs := o.FS
	if err := removeIfExists(fs, o.IndexDir, pebbleTmpSubdir); err != nil {
		return nil, err
	}
	dir := fs.PathJoin(o.IndexDir, pebbleSubdir)
	if _, err := fs.Stat(dir); durable.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("index in %s: %w", o.IndexDir, err)
	}
	db, err := pebble.Open(dir, pebbleOptions(o, log))
	if err != nil {
		return nil, fmt.Errorf("open index in %s: %w", o.IndexDir, err)
	}
	return db, nil
}

// createIndex creates the index whole: a new Pebble store under a
// temporary name gets its format record (synced) and is closed, its
// directory synced, and renamed into place. Pebble's own creation is not
// crash-atomic (its manifest marker can become durable before the
// manifest's directory entry); this way a crash leaves either no index or
// a complete one, and Open removes the temporary directory.
func createIndex(o Options, log *slog.Logger, id [storageIDSize]byte) error {
	fs := o.FS
	tmp := fs.PathJoin(o.IndexDir, pebbleTmpSubdir)
	popts := pebbleOptions(o, log)
	popts.ErrorIfNotExists = false
	db, err := pebble.Open(tmp, popts)
	if err != nil {
		return fmt.Errorf("create index in %s: %w", o.IndexDir, err)
	}
	err = db.Set(formatKey, encodeFormat(formatRecord{version: indexFormatVersion, storageID: id}), pebble.Sync)
	if err = errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("create index in %s: %w", o.IndexDir, err)
	}
	if err := durable.SyncDir(fs, tmp); err != nil {
		return err
	}
	if err := fs.Rename(tmp, fs.PathJoin(o.IndexDir, pebbleSubdir)); err != nil {
		return fmt.Errorf("create index in %s: %w", o.IndexDir, err)
	}
	return durable.SyncDir(fs, o.IndexDir)
}

func removeIfExists(fs vfs.FS, dir, name string) error {
	p := fs.PathJoin(dir, name)
	if _, err := fs.Stat(p); durable.IsNotExist(err) {
		return nil
	}
	if err := fs.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return durable.SyncDir(fs, dir)
}

// readRoleCookie reads dir's cookie and checks it names this bookie and
// role. missing reports a directory without a cookie.
func readRoleCookie(o Options, dir, role string, want Cookie) (c Cookie, missing bool, err error) {
	c, err = ReadCookie(o.FS, dir)
	if errors.Is(err, ErrCookieMissing) {
		return Cookie{}, true, nil
	}
	if err != nil {
		return Cookie{}, false, err
	}
	want.Role = role
	return c, false, c.Check(dir, want)
}

// hasEntryLogs reports whether the ledger dir holds any entry log file.
func hasEntryLogs(o Options) (bool, error) {
	names, err := o.FS.List(o.Dir)
	if err != nil {
		return false, fmt.Errorf("list %s: %w", o.Dir, err)
	}
	for _, n := range names {
		if _, ok := parseLogName(n); ok {
			return true, nil
		}
	}
	return false, nil
}

// readFormatRecord returns the index's format record, and whether the
// index holds anything else that is ledger data (the next-file counter is
// not: it says files were created, not that anything was stored in them).
func readFormatRecord(db *pebble.DB) (fr formatRecord, found, data bool, err error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return fr, false, false, err
	}
	for valid := it.First(); valid; valid = it.Next() {
		switch string(it.Key()) {
		case string(formatKey):
			if fr, err = decodeFormat(it.Value()); err != nil {
				return fr, false, false, errors.Join(err, it.Close())
			}
			found = true
		case string(nextFileKey):
		default:
			data = true
		}
		if found && data {
			break
		}
	}
	return fr, found, data, errors.Join(it.Error(), it.Close())
}
