package bookie

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
	"github.com/sluicemq/sluice/bookkeeper/storage"
	"github.com/sluicemq/sluice/bookkeeper/wire"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// Draining, set over the RPC, refuses normal adds (REJECTED) but takes
// recovery adds and serves reads; it survives a restart with its start
// time, and cancelling it (also durable) makes the bookie writable again.
func TestDrainingIsDurableAndRefusesNormalAdds(t *testing.T) {
	fs := vfs.NewCrashableMem()
	cfg := testConfig(fs)
	b := mustOpen(t, cfg)
	addWait(t, b, 1, 0, -1)
	c := serve(t, b)
	ctx := context.Background()
	resp, err := c.SetDraining(ctx, connect.NewRequest(&bookiev1.SetDrainingRequest{Draining: true}))
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Msg.GetStatus()
	if !st.GetDraining() || !st.GetReadOnly() || st.GetDrainingSinceMs() == 0 {
		t.Fatalf("status after SetDraining(true): %v", st)
	}
	since := st.GetDrainingSinceMs()
	p := payload(1, 1)
	normal := AddRequest{Ledger: 1, Entry: 1, LAC: 0, Payload: p, MasterKey: testKey, Checksum: wire.EntryChecksum(1, 1, 0, p)}
	if err := b.Add(ctx, normal, func(error) {}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("normal add while draining: %v; want ErrReadOnly", err)
	}
	rec := normal
	rec.Recovery = true
	done := make(chan error, 1)
	if err := b.Add(ctx, rec, func(err error) { done <- err }); err != nil || <-done != nil {
		t.Fatalf("recovery add while draining: %v", err)
	}
	if got, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 1, FirstEntry: 0, LastEntry: 1})); err != nil || len(got.Msg.GetEntries()) != 2 {
		t.Fatalf("read while draining: %v, %v", got, err)
	}
	// Setting it again keeps the original start.
	if again, err := c.SetDraining(ctx, connect.NewRequest(&bookiev1.SetDrainingRequest{Draining: true})); err != nil || again.Msg.GetStatus().GetDrainingSinceMs() != since {
		t.Fatalf("SetDraining(true) twice: %v, %v; want since %d kept", again, err, since)
	}
	// A crash right after the answer keeps the state (the file was synced
	// with its directory): reopen from the crash image.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	mustClose(t, b)
	b = mustOpen(t, testConfig(crashed))
	if s := b.Status(); !s.Draining || !s.ReadOnly || s.DrainingSince.UnixMilli() != since {
		t.Fatalf("after a restart: %+v; want draining since %d", s, since)
	}
	if err := b.SetDraining(false); err != nil {
		t.Fatal(err)
	}
	if s := b.Status(); s.Draining || s.ReadOnly {
		t.Fatalf("after cancel: %+v", s)
	}
	addWait(t, b, 1, 2, 1)
	image := crashed.CrashClone(vfs.CrashCloneCfg{})
	mustClose(t, b)
	b = mustOpen(t, testConfig(image))
	if s := b.Status(); s.Draining {
		t.Fatalf("cancel did not survive a restart: %+v", s)
	}
	mustClose(t, b)
}

// A damaged draining marker stops the bookie from starting, naming the
// file: it never guesses whether it was draining.
func TestDrainMarkerCorruptionRefusesStart(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(fs)
	b := mustOpen(t, cfg)
	if err := b.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	mustClose(t, b)
	dir := b.cfg.JournalDir
	good := encodeDrain(time.UnixMilli(1_700_000_000_000))
	flipped := append([]byte(nil), good...)
	flipped[len(drainMagic)+12]++ // a digit of since_ms
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"bit flip", flipped},
		{"truncated", bytes.Clone(good[:len(good)-5])}, // a copy: the mem FS may keep the slice it is given
		{"version two", []byte(strings.Replace(string(encodeDrain(time.UnixMilli(1))), "version=1", "version=2", 1))},
		{"empty", nil},
	} {
		name, data := c.name, c.data
		if err := durable.WriteFileAtomic(fs, dir, DrainFile, data); err != nil {
			t.Fatal(err)
		}
		_, err := Open(testConfig(fs))
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), DrainFile) {
			t.Errorf("%s: Open = %v; want ErrCorrupt naming %s", name, err, DrainFile)
		}
	}
	if err := durable.WriteFileAtomic(fs, dir, DrainFile, good); err != nil {
		t.Fatal(err)
	}
	b = mustOpen(t, testConfig(fs))
	if since, ok := b.Draining(); !ok || since.UnixMilli() != 1_700_000_000_000 {
		t.Fatalf("a good marker: draining %v since %v", ok, since)
	}
	mustClose(t, b)
}

func TestDrainMarkerRoundTrip(t *testing.T) {
	for _, ms := range []int64{1, 1_700_000_000_123, 1 << 50} {
		got, err := decodeDrain(encodeDrain(time.UnixMilli(ms)))
		if err != nil || got.UnixMilli() != ms {
			t.Errorf("round trip of %d: %v, %v", ms, got, err)
		}
	}
}
