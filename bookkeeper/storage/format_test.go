package storage

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/pebblelog"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// The on-disk bytes of version 1, pinned (checksums cross-checked with an
// independent bitwise CRC32C). A change here is a format change: add a
// version (readers keep reading this one) instead.
func TestFormatGolden(t *testing.T) {
	var sid [storageIDSize]byte
	copy(sid[:], "0123456789abcdef")
	payload := []byte("hi")
	crc := wire.EntryChecksum(5, 7, 6, payload)
	key := entryKey(5, 7)
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"EntryChecksum", []byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)}, "b9b44f5c"},
		{"frame", appendFrame(nil, 5, 7, 6, crc, payload),
			"02000000" + "5c4fb4b9" + "0000000000000005" + "0000000000000007" + "0000000000000006" + "6869"},
		{"log header", logHeader{fileID: 3, storageID: sid}.encode(),
			"534c43454c4f4700" + "0100" + "0000" + "0300000000000000" + hex.EncodeToString(sid[:]) + "e81209f5"},
		{"entry key", key, "65" + "0000000000000005" + "0000000000000007"},
		{"location", encodeLocation(key, location{file: 3, offset: 40, length: 2}),
			"0300000000000000" + "2800000000000000" + "02000000" + "c21bf2bb"},
		{"ledger metadata", encodeMeta(metaKey(5), ledgerMeta{flags: flagFenced, lac: 6, masterKey: []byte("k")}),
			"01" + "01" + "0100" + "0600000000000000" + "6b" + "1ef94f4d"},
		{"usage", encodeU64(usageKey(3, 5), 34), "2200000000000000" + "58f4c74e"},
	} {
		if got := hex.EncodeToString(c.got); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// Versions only move forward: a version this build does not know is
// refused with an error that names it, never guessed at.
func TestUnknownVersionsRefused(t *testing.T) {
	h := logHeader{fileID: 1}.encode()
	h[8] = 2
	fixLogHeaderCRC(h)
	if _, err := decodeLogHeader(h); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("log header version 2: %v", err)
	}
	m := encodeMeta(metaKey(1), ledgerMeta{lac: -1, masterKey: []byte("k")})
	m[0] = 2
	if _, err := decodeMeta(metaKey(1), m); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("metadata version 2 decoded: %v", err)
	}

	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	db, err := pebble.Open(fs.PathJoin(testIndexDir, pebbleSubdir), &pebble.Options{FS: fs, Logger: pebblelog.New(discard())})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(formatKey)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeFormat(v)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	r.version = 2
	if err := errors.Join(db.Set(formatKey, encodeFormat(r), pebble.Sync), db.Close()); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, testOptions(fs), ErrCorrupt, "index format version 2")
}

func fixLogHeaderCRC(b []byte) {
	c := keyedChecksum(nil, b[0:36])
	b[36], b[37], b[38], b[39] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

// Read handles and ledger metadata stay within their bounds, and an
// evicted ledger comes back whole from the index.
func TestCachesBounded(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.MaxCachedLedgers = 8
	s := mustOpen(t, o)
	defer mustClose(t, s)
	const ledgers = 40
	for e := int64(0); e < 10; e++ {
		for l := int64(1); l <= ledgers; l++ {
			mustAdd(t, s, l, e)
		}
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Fence(3, keyOf(3)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLAC(4, keyOf(4), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for l := int64(1); l <= ledgers; l++ {
		for e := int64(0); e < 10; e++ {
			checkEntry(t, s, l, e)
		}
		info, err := s.Ledger(l)
		if err != nil || info.LastEntry != 9 || info.Fenced != (l == 3) {
			t.Fatalf("Ledger(%d) = %+v, %v", l, info, err)
		}
		if l == 4 && info.LAC != 42 {
			t.Fatalf("ledger 4 LAC %d after eviction, want 42", info.LAC)
		}
	}
	wantErr(t, "add to the fenced, evicted ledger", s.AddEntry(context.Background(), request(3, 10, 9, nil)), ErrFenced)
	s.mu.Lock()
	cached := len(s.ledgers)
	s.mu.Unlock()
	s.cache.mu.Lock()
	open := len(s.cache.files)
	s.cache.mu.Unlock()
	if cached > 8 || open > o.MaxOpenFiles {
		t.Fatalf("%d ledgers cached (max 8), %d files open (max %d)", cached, open, o.MaxOpenFiles)
	}
}
