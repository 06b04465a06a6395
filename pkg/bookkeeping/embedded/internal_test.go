package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/bookkeeping"

	"github.com/sluicemq/sluice/pkg/pebblelog"
)

func openMem(t *testing.T, fs vfs.FS, opts ...Option) *store {
	t.Helper()
	s, err := openStore("/db", append([]Option{WithFS(fs)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestCorruptValuesAreRefused: a stored value with a flipped bit, a wrong
// kind or garbage is reported as ErrCorrupt by every call that reads it —
// never used, never silently replaced.
func TestCorruptValuesAreRefused(t *testing.T) {
	ctx := context.Background()
	key := partitionKey("g", "t", 0)
	good := partitionRecord{owner: "", epoch: 1, offset: 5}.encode()
	flipped := bytes.Clone(good)
	flipped[3] ^= 0x10
	wrongKind := memberRecord{sessionTimeout: int64(time.Second)}.encode()
	for name, v := range map[string][]byte{"flipped bit": flipped, "wrong kind": wrongKind, "garbage": []byte("garbage!"), "empty": {}} {
		t.Run(name, func(t *testing.T) {
			s := openMem(t, vfs.NewMem())
			if err := s.db.Set(key, v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
				t.Fatal(err)
			}
			_, err := s.FetchOffset(ctx, "g", "t", 0)
			wantCorrupt(t, "FetchOffset", err)
			_, err = s.ListLeases(ctx, "g", "t")
			wantCorrupt(t, "ListLeases", err)
			_, _, err = s.ListOffsets(ctx, "g", bookkeeping.Cursor{}, 10)
			wantCorrupt(t, "ListOffsets", err)
			_, err = s.Acquire(ctx, "g", "t", 0, "m")
			wantCorrupt(t, "Acquire", err)
			err = s.Commit(ctx, bookkeeping.Commit{Group: "g", Topic: "t", TopicID: "id", Member: "m", Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 9, Epoch: 1}}})
			wantCorrupt(t, "Commit", err)
			// The bad value is still there, untouched, for an operator.
			if got, _ := s.get(key); !bytes.Equal(got, v) {
				t.Fatal("a corrupt value was overwritten")
			}
		})
	}
}

func wantCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s over a corrupt value: %v, want ErrCorrupt", what, err)
	}
}

func TestOpenRefusesOtherFormats(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	if err := s.db.Set(formatKey, formatRecord{version: storeFormat + 1}.encode(), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open("/db", WithFS(fs)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("store format %d", storeFormat+1)) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("Open of a format-%d store: %v", storeFormat+1, err)
	}
}

func TestOpenRefusesRecordsWithoutFormat(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("/db", &pebble.Options{FS: fs, Logger: pebblelog.New(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("some other data"), []byte("x"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open("/db", WithFS(fs)); !errors.Is(err, ErrCorrupt) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a foreign Pebble database: %v, want ErrCorrupt", err)
	}
}

func TestProducerEpochExhausted(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, vfs.NewMem())
	first, err := s.InitProducer(ctx, "txn")
	if err != nil {
		t.Fatal(err)
	}
	rec := bookkeeping.Txn{TransactionalID: "txn", ProducerID: first.ID, Epoch: bookkeeping.MaxProducerEpoch, Status: bookkeeping.TxnEmpty, Version: 1}
	if err := s.db.Set(txnKey("txn"), encodeTxn(rec), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	next, err := s.InitProducer(ctx, "txn")
	if err != nil || next.ID == first.ID || next.Epoch != 0 {
		t.Fatalf("InitProducer at the highest epoch = %+v, %v; want a new id at epoch 0", next, err)
	}
}

// TestPebbleChatterIsDebug: Pebble's routine messages ("Found 0 WALs") go to
// the injected logger at Debug, never to stderr or at Info.
func TestPebbleChatterIsDebug(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	openMem(t, vfs.NewMem(), WithLogger(logger))
	out := buf.String()
	if !strings.Contains(out, "WALs") {
		t.Fatalf("Pebble's open messages did not reach the injected logger:\n%s", out)
	}
	for line := range strings.Lines(out) {
		if !strings.Contains(line, "level=DEBUG") {
			t.Fatalf("Pebble message above Debug: %s", line)
		}
	}
}

// TestGroupSizeIsBounded: Join refuses a member past MaxGroupMembers, but a
// member already in the group may join again, and expired members do not
// count.
func TestGroupSizeIsBounded(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	s := openMem(t, vfs.NewMem(), WithClock(func() time.Time { return now }))
	join := func(id string) error {
		return s.Join(ctx, "g", bookkeeping.Member{ID: id, SessionTimeout: time.Minute})
	}
	// Fill the group directly in one batch: Joining 4096 members one by
	// one is quadratic (each Join counts the group), too slow under -race.
	b := s.db.NewBatch()
	rec := memberRecord{sessionTimeout: int64(time.Minute), expiresAt: now.Add(time.Minute).UnixNano()}
	for i := range bookkeeping.MaxGroupMembers {
		if err := b.Set(memberKey("g", fmt.Sprintf("m%05d", i)), rec.encode(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := join("one-too-many"); !errors.Is(err, bookkeeping.ErrConflict) {
		t.Fatalf("Join past the limit: %v, want ErrConflict", err)
	}
	if err := join("m00000"); err != nil {
		t.Fatalf("re-Join of a member of a full group: %v", err)
	}
	now = now.Add(2 * time.Minute) // everyone expires
	if err := join("one-too-many"); err != nil {
		t.Fatalf("Join after the others expired: %v", err)
	}
	if ms, err := s.ListMembers(ctx, "g"); err != nil || len(ms) != 1 {
		t.Fatalf("ListMembers = %d members, %v; want 1", len(ms), err)
	}
}

// TestUpgradeFromFormat1: a store written by a format-1 binary (no group
// records, version-1 member records) opens as format 2 with a group record
// for every group that has members or partitions, and its members read as
// members without topics.
func TestUpgradeFromFormat1(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := time.Unix(1_000_000, 0)
	db, err := pebble.Open("/db", &pebble.Options{FS: fs, Logger: pebblelog.New(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	v1Member := func(expires time.Time) []byte {
		e := newEncoder(kindMember) // version 1: no topics
		e.str("old client")
		e.int(int64(time.Minute))
		e.int(expires.UnixNano())
		return e.seal()
	}
	free := partitionRecord{epoch: 1, offset: 7}.encode()
	for _, kv := range []struct {
		k, v []byte
	}{
		{formatKey, formatRecord{version: 1}.encode()},
		{memberKey("a", "m1"), v1Member(now.Add(30 * time.Second))},
		{memberKey("a", "m2"), v1Member(now.Add(-time.Hour))}, // expired: its group still counts
		{memberKey("a b", "m"), v1Member(now.Add(time.Second))},
		{partitionKey("a", "orders", 0), free},
		{partitionKey("offsets-only", "t", 1), free},
		{partitionKey("offsets-only", "u", 0), free},
		{partitionKey("zz", "t", 0), free},
	} {
		if err := db.Set(kv.k, kv.v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMem(t, fs, WithClock(func() time.Time { return now }))
	want := []string{"a", "a b", "offsets-only", "zz"}
	if gs, more, err := s.ListGroups(ctx, "", 10); err != nil || more || !slices.Equal(gs, want) {
		t.Fatalf("ListGroups after the upgrade = %q (more %v), %v; want %q", gs, more, err, want)
	}
	if v, _ := s.get(formatKey); !bytes.Equal(v, formatRecord{version: storeFormat}.encode()) {
		t.Fatalf("format record after the upgrade: %v", v)
	}
	ms, err := s.ListMembers(ctx, "a")
	want1 := bookkeeping.Member{ID: "m1", ClientInfo: "old client", SessionTimeout: time.Minute, LastHeartbeat: now.Add(-30 * time.Second).UTC()}
	if err != nil || len(ms) != 1 || !reflect.DeepEqual(ms[0], want1) {
		t.Fatalf("ListMembers of a version-1 member = %+v, %v; want [%+v]", ms, err, want1)
	}
	if err := s.Heartbeat(ctx, "a", "m1"); err != nil {
		t.Fatalf("Heartbeat of a version-1 member: %v", err)
	}
	if v, _ := s.get(memberKey("a", "m1")); len(v) < 2 || v[1] != memberVersion {
		t.Fatalf("member record after Heartbeat: %v, want version %d", v, memberVersion)
	}
}

// TestCorruptGroupRecordIsRefused: ListGroups reports a bad group record
// instead of listing it.
func TestCorruptGroupRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, vfs.NewMem())
	if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(groupKey("h"), []byte("garbage!"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.ListGroups(ctx, "", 10)
	wantCorrupt(t, "ListGroups", err)
	if v, _ := s.get(groupKey("h")); string(v) != "garbage!" {
		t.Fatal("a corrupt group record was overwritten")
	}
}

// TestUpgradeFromFormat2: a store written by a format-2 binary (partition
// records of version 1, offsets without topic ids) opens as format 3 without
// rewriting them; they read as offsets without a topic id, which the first
// commit with an id replaces whatever its offset (an unknown incarnation).
func TestUpgradeFromFormat2(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := pebble.Open("/db", &pebble.Options{FS: fs, Logger: pebblelog.New(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	// owner "m", epoch 2, offset 42, metadata "x", commit epoch 2.
	v1Partition := reseal(kindPartition, []byte{1, 'm', 4, 84, 1, 'x', 4})
	for _, kv := range []struct {
		k, v []byte
	}{
		{formatKey, formatRecord{version: 2}.encode()},
		{groupKey("g"), groupRecord{}.encode()},
		{partitionKey("g", "orders", 3), v1Partition},
	} {
		if err := db.Set(kv.k, kv.v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMem(t, fs)
	if v, _ := s.get(formatKey); !bytes.Equal(v, formatRecord{version: storeFormat}.encode()) {
		t.Fatalf("format record after the upgrade: %v", v)
	}
	if v, _ := s.get(partitionKey("g", "orders", 3)); !bytes.Equal(v, v1Partition) {
		t.Fatal("the upgrade rewrote a version 1 partition record")
	}
	r, ok, err := s.partition(partitionKey("g", "orders", 3))
	want := partitionRecord{owner: "m", epoch: 2, offset: 42, metadata: "x", commitEpoch: 2}
	if err != nil || !ok || r != want {
		t.Fatalf("version 1 partition record after the upgrade = %+v (found %v), %v; want %+v", r, ok, err, want)
	}
	if c, err := s.FetchOffset(ctx, "g", "orders", 3); err != nil || c != (bookkeeping.Committed{Offset: 42, Metadata: "x", Epoch: 2}) {
		t.Fatalf("FetchOffset of a version 1 record = %+v, %v; want offset 42 without a topic id", c, err)
	}
	if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c := bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "id", Member: "m", Offsets: []bookkeeping.PartitionOffset{{Partition: 3, Offset: 7, Epoch: 2}}}
	if err := s.Commit(ctx, c); err != nil {
		t.Fatalf("Commit with a topic id below an offset without one: %v", err)
	}
	if got, err := s.FetchOffset(ctx, "g", "orders", 3); err != nil || got != (bookkeeping.Committed{Offset: 7, Epoch: 2, TopicID: "id"}) {
		t.Fatalf("FetchOffset after the commit = %+v, %v; want offset 7 of topic id \"id\"", got, err)
	}
	if v, _ := s.get(partitionKey("g", "orders", 3)); len(v) < 2 || v[1] != partitionVersion {
		t.Fatalf("partition record after a commit: %v, want version %d", v, partitionVersion)
	}
}

// TestUpgradeFromFormat3: a store written by a format-3 binary (transactional
// id records of version 1: producer id and epoch) opens as format 4 without
// rewriting them; they read as idle records at version 1, a PutTxn at
// version 1 or an InitProducer writes them as version 2, and a corrupt one
// is refused by every call that reads it.
func TestUpgradeFromFormat3(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := pebble.Open("/db", &pebble.Options{FS: fs, Logger: pebblelog.New(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	v1 := func(pid, epoch int64) []byte {
		e := newEncoder(kindTxn)
		e.int(pid)
		e.int(epoch)
		return e.seal()
	}
	for _, kv := range []struct {
		k, v []byte
	}{
		{formatKey, formatRecord{version: 3}.encode()},
		{counterKey, counterRecord{next: 10}.encode()},
		{txnKey("a"), v1(7, 3)},
		{txnKey("b"), v1(8, 0)},
		{txnKey("c"), []byte("garbage!")},
	} {
		if err := db.Set(kv.k, kv.v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMem(t, fs)
	if v, _ := s.get(formatKey); !bytes.Equal(v, formatRecord{version: storeFormat}.encode()) {
		t.Fatalf("format record after the upgrade: %v", v)
	}
	if v, _ := s.get(txnKey("a")); !bytes.Equal(v, v1(7, 3)) {
		t.Fatal("the upgrade rewrote a version 1 transactional id record")
	}
	a := bookkeeping.Txn{TransactionalID: "a", ProducerID: 7, Epoch: 3, Status: bookkeeping.TxnEmpty, Version: 1}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn of a version 1 record = %+v, %v; want %+v", got, err, a)
	}
	p, err := s.InitProducer(ctx, "a")
	if err != nil || p != (bookkeeping.Producer{ID: 7, Epoch: 4}) {
		t.Fatalf("InitProducer over a version 1 record = %+v, %v; want id 7 epoch 4", p, err)
	}
	a.Epoch, a.BumpedByCoordinator, a.Version = 4, true, 2
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn after InitProducer = %+v, %v; want %+v", got, err, a)
	}
	if v, _ := s.get(txnKey("a")); len(v) < 2 || v[1] != txnVersion {
		t.Fatalf("txn record after InitProducer: %v, want version %d", v, txnVersion)
	}
	b := bookkeeping.Txn{TransactionalID: "b", ProducerID: 8, Epoch: 1, Status: bookkeeping.TxnCompleteAbort, Version: 1}
	if got, err := s.PutTxn(ctx, b); err != nil || got.Version != 2 {
		t.Fatalf("PutTxn at version 1 over a version 1 record = %+v, %v; want version 2", got, err)
	}
	_, err = s.GetTxn(ctx, "c")
	wantCorrupt(t, "GetTxn", err)
	_, err = s.InitProducer(ctx, "c")
	wantCorrupt(t, "InitProducer", err)
	_, err = s.PutTxn(ctx, bookkeeping.Txn{TransactionalID: "c", ProducerID: 1, Status: bookkeeping.TxnEmpty})
	wantCorrupt(t, "PutTxn", err)
	_, _, err = s.ListTxns(ctx, "", 10)
	wantCorrupt(t, "ListTxns", err)
	if txns, more, err := s.ListTxns(ctx, "", 2); err != nil || !more || len(txns) != 2 || txns[0].TransactionalID != "a" || txns[1].TransactionalID != "b" {
		t.Fatalf("ListTxns(\"\", 2) before the corrupt record = %+v (more %v), %v; want a and b, more", txns, more, err)
	}
	if v, _ := s.get(txnKey("c")); string(v) != "garbage!" {
		t.Fatal("a corrupt transactional id record was overwritten")
	}
}
