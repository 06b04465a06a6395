package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// CookieFile is the cookie's name in every data directory.
const CookieFile = "COOKIE"

// Directory roles recorded in cookies. RoleJournal is for the bookie's
// journal directory, which the bookie stamps with WriteCookie itself.
const (
	RoleLedgers = "ledgers"
	RoleIndex   = "index"
	RoleJournal = "journal"
)

const (
	cookieMagic      = "sluice-bookie-cookie"
	cookieVersion    = 1
	maxCookieSize    = 64 << 10
	cookieCRCPrefix  = "crc32c="
	cookieFieldCount = 7
)

// Cookie is the identity file of a data directory (BookKeeper's Cookie):
// which bookie, cluster and storage the directory belongs to and in which
// role. A bookie checks every directory's cookie at start, so a disk that
// was wiped, swapped with another bookie's, or mounted at the wrong path is
// refused instead of served as if it had never held data.
type Cookie struct {
	BookieID   string
	InstanceID string
	// StorageID is 32 hex digits, random, chosen when the storage was
	// formatted; every directory of one storage carries the same.
	StorageID string
	Role      string // RoleLedgers, RoleIndex or RoleJournal
	// LedgerDir and IndexDir are the paths the storage was formatted
	// with, for the operator's benefit: they are shown in errors, not
	// compared (mount points may legitimately move).
	LedgerDir string
	IndexDir  string
}

// Encode returns the cookie file's bytes (see "Cookie" in the package doc).
func (c Cookie) Encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nversion=%d\n", cookieMagic, cookieVersion)
	for _, f := range c.fields() {
		fmt.Fprintf(&b, "%s=%s\n", f.name, *f.v)
	}
	fmt.Fprintf(&b, "%s%08x\n", cookieCRCPrefix, crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

type cookieField struct {
	name string
	v    *string
}

func (c *Cookie) fields() []cookieField {
	return []cookieField{
		{"bookie_id", &c.BookieID}, {"instance_id", &c.InstanceID}, {"storage_id", &c.StorageID},
		{"role", &c.Role}, {"ledger_dir", &c.LedgerDir}, {"index_dir", &c.IndexDir},
	}
}

// DecodeCookie parses a cookie file. Anything but a complete cookie of a
// known version with a matching checksum is ErrCorrupt.
func DecodeCookie(b []byte) (Cookie, error) {
	if len(b) > maxCookieSize {
		return Cookie{}, corruptf("cookie of %d bytes", len(b))
	}
	i := bytes.LastIndex(b, []byte("\n"+cookieCRCPrefix))
	if i < 0 {
		return Cookie{}, corruptf("cookie without checksum line")
	}
	body, tail := b[:i+1], string(b[i+1+len(cookieCRCPrefix):])
	if want := fmt.Sprintf("%08x\n", crc32.Checksum(body, castagnoli)); tail != want {
		return Cookie{}, corruptf("cookie checksum line %q, computed %q", tail, want)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != cookieFieldCount+1 || lines[0] != cookieMagic {
		return Cookie{}, corruptf("cookie has %d lines, first %q", len(lines), lines[0])
	}
	if lines[1] != fmt.Sprintf("version=%d", cookieVersion) {
		return Cookie{}, corruptf("cookie %q; this build reads version %d", lines[1], cookieVersion)
	}
	var c Cookie
	for j, f := range c.fields() {
		v, ok := strings.CutPrefix(lines[j+2], f.name+"=")
		if !ok {
			return Cookie{}, corruptf("cookie line %q, want %s=", lines[j+2], f.name)
		}
		*f.v = v
	}
	return c, nil
}

// ReadCookie reads dir's cookie. A missing cookie is ErrCookieMissing
// (wrapping os.ErrNotExist); an unreadable one ErrCorrupt.
func ReadCookie(fs vfs.FS, dir string) (Cookie, error) {
	name := fs.PathJoin(dir, CookieFile)
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return Cookie{}, fmt.Errorf("%w: %s: %w", ErrCookieMissing, name, err)
	}
	if err != nil {
		return Cookie{}, fmt.Errorf("read cookie %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCookieSize+1))
	if err != nil {
		return Cookie{}, fmt.Errorf("read cookie %s: %w", name, err)
	}
	c, err := DecodeCookie(b)
	if err != nil {
		return Cookie{}, fmt.Errorf("cookie %s: %w", name, err)
	}
	return c, nil
}

// WriteCookie writes dir's cookie atomically (temporary file, sync,
// rename, directory sync).
func WriteCookie(fs vfs.FS, dir string, c Cookie) error {
	if err := durable.WriteFileAtomic(fs, dir, CookieFile, c.Encode()); err != nil {
		return fmt.Errorf("write cookie in %s: %w", dir, err)
	}
	return nil
}

// Check returns ErrCookieMismatch, with what differs and what it means,
// unless c names want's bookie, instance and role, and want's storage id
// when want has one. dir is the directory c was read from.
func (c Cookie) Check(dir string, want Cookie) error {
	switch {
	case c.BookieID != want.BookieID || c.InstanceID != want.InstanceID:
		return fmt.Errorf("%w: %s belongs to bookie %q of instance %q, not this bookie %q of instance %q: "+
			"a disk of another bookie or cluster is mounted here", ErrCookieMismatch, dir, c.BookieID, c.InstanceID, want.BookieID, want.InstanceID)
	case c.Role != want.Role:
		return fmt.Errorf("%w: %s is a %q directory (formatted as ledger dir %s, index dir %s) but is configured as the %q directory: "+
			"disks swapped or mounted at the wrong path", ErrCookieMismatch, dir, c.Role, c.LedgerDir, c.IndexDir, want.Role)
	case want.StorageID != "" && c.StorageID != want.StorageID:
		return fmt.Errorf("%w: %s belongs to storage %s (formatted as ledger dir %s, index dir %s), this bookie's is %s: "+
			"a disk from another or an earlier install of this bookie is mounted here", ErrCookieMismatch, dir, c.StorageID, c.LedgerDir, c.IndexDir, want.StorageID)
	}
	return nil
}

// newStorageID returns a random storage id.
func newStorageID() ([storageIDSize]byte, error) {
	var id [storageIDSize]byte
	_, err := rand.Read(id[:])
	return id, err
}

func parseStorageID(s string) ([storageIDSize]byte, error) {
	var id [storageIDSize]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != storageIDSize {
		return id, fmt.Errorf("storage id %q is not %d hex digits", s, 2*storageIDSize)
	}
	copy(id[:], b)
	return id, nil
}

func formatStorageID(id [storageIDSize]byte) string { return hex.EncodeToString(id[:]) }
