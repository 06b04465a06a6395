package embedded

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestValueCodecRejectsDamage(t *testing.T) {
	key := []byte("t/x")
	good := encodeValue(ownerRec{ID: "a", Address: "b", ExpiresMs: 7})
	var r ownerRec
	if err := decodeValue(key, good, &r); err != nil || r.ExpiresMs != 7 {
		t.Fatalf("round trip: %+v, %v", r, err)
	}
	damage := map[string][]byte{
		"empty":         nil,
		"short":         good[:3],
		"version":       append([]byte{9}, good[1:]...),
		"flipped bit":   flip(good, len(good)-3),
		"bad checksum":  flip(good, 2),
		"unknown field": encodeValue(map[string]any{"id": "a", "color": "red"}),
		"trailing data": frame(append(append([]byte(nil), good[valueHeaderLen:]...), []byte(" {}")...)),
		"not json":      frame([]byte("{{")),
	}
	for name, v := range damage {
		if err := decodeValue(key, v, &ownerRec{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0x10
	return out
}

// TestCorruptRecordFailsReads: a damaged stored record is an error, never a
// silently wrong answer.
func TestCorruptRecordFailsReads(t *testing.T) {
	ctx := context.Background()
	c, err := open("catalog", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cat := catalog.New(c) // the calls as callers make them; c.db to damage records
	if _, err := cat.CreateTopic(ctx, "orders", 1, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	v, closer, err := c.db.Get(topicKey("orders"))
	if err != nil {
		t.Fatal(err)
	}
	bad := flip(v, len(v)-5)
	_ = closer.Close()
	if err := c.db.Set(topicKey("orders"), bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.GetTopic(ctx, "orders"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetTopic of a corrupt record: %v, want ErrCorrupt", err)
	}
	if _, err := cat.ListTopics(ctx, "", 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ListTopics over a corrupt record: %v, want ErrCorrupt", err)
	}
	if _, err := cat.CreateTopic(ctx, "orders", 1, catalog.DefaultTopicConfig()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CreateTopic over a corrupt record: %v, want ErrCorrupt", err)
	}

	// A record that decodes but breaks the catalog's rules is corrupt too.
	if err := c.db.Set(topicKey("orders"), encodeValue(topicRec{Name: "orders", ID: "x", Partitions: 0, Version: 1,
		Config: catalog.DefaultTopicConfig().Map()}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.GetTopic(ctx, "orders"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetTopic of a record with 0 partitions: %v, want ErrCorrupt", err)
	}
}

func TestOpenRefusesAnotherStoreFormat(t *testing.T) {
	fs := vfs.NewMem()
	c, err := open("catalog", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.db.Set(formatKey, encodeValue(formatRec{Format: storeFormat + 1}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if c, err := Open("catalog", Options{FS: fs}); err == nil {
		_ = c.Close()
		t.Fatal("Open accepted a store of an unknown format")
	}
}

// TestPebbleLogsGoToTheInjectedLogger: Pebble's chatter ("Found 0 WALs")
// lands in the given logger at debug level, not on stderr.
func TestPebbleLogsGoToTheInjectedLogger(t *testing.T) {
	h := &recordingHandler{}
	c, err := Open("catalog", Options{FS: vfs.NewMem(), Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == 0 {
		t.Fatal("Pebble logged nothing through the injected logger")
	}
	for _, r := range h.records {
		if r.Level > slog.LevelDebug || !strings.HasPrefix(r.Message, "pebble") {
			t.Fatalf("unexpected record %v %q", r.Level, r.Message)
		}
	}
}

type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// TestRegistryBound: a new heartbeat record is refused once the registry is
// full, renewals still pass, and listing refuses to return more than the
// bound. (The bound is MaxOwners in production; a small one is used here.)
func TestRegistryBound(t *testing.T) {
	ctx := context.Background()
	c, err := open("catalog", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.HeartbeatOwner(ctx, id, "x:1", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	err = c.write(func() error { return c.checkRegistryRoom(ownerPrefix, ownerKey("d"), 3) })
	if !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("a 4th record in a registry of 3: %v, want ErrLimitExceeded", err)
	}
	if err := c.write(func() error { return c.checkRegistryRoom(ownerPrefix, ownerKey("b"), 3) }); err != nil {
		t.Fatalf("renewal in a full registry: %v", err)
	}
	err = c.read(func() error { return c.scanRegistry(ownerPrefix, 2, func(_, _ []byte) error { return nil }) })
	if !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("listing 3 records with a bound of 2: %v, want ErrLimitExceeded", err)
	}
}
