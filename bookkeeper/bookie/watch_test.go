package bookie

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

type watchStream = *connect.BidiStreamForClient[bookiev1.WatchLacRequest, bookiev1.WatchLacResponse]

// receiveAdvances reads answers until n arrived, keyed by watch id; more
// than one answer per id fails the test.
func receiveAdvances(t *testing.T, s watchStream, n int) map[uint64]*bookiev1.LacAdvance {
	t.Helper()
	got := map[uint64]*bookiev1.LacAdvance{}
	for len(got) < n {
		resp, err := s.Receive()
		if err != nil {
			t.Fatalf("after %d of %d answers: %v", len(got), n, err)
		}
		if len(resp.GetAdvances()) == 0 {
			t.Fatal("a WatchLac response without advances")
		}
		for _, a := range resp.GetAdvances() {
			if got[a.GetId()] != nil {
				t.Fatalf("watch %d answered twice", a.GetId())
			}
			got[a.GetId()] = a
		}
	}
	return got
}

func sendWatches(t *testing.T, s watchStream, ws ...*bookiev1.LacWatch) {
	t.Helper()
	if err := s.Send(&bookiev1.WatchLacRequest{Watches: ws}); err != nil {
		t.Fatal(err)
	}
}

func (b *Bookie) lacWaiters() int {
	b.lacs.mu.Lock()
	defer b.lacs.mu.Unlock()
	return b.lacs.waiters
}

// One WatchLac stream carries the long-polls of several ledgers: a watch
// fires once when its ledger's LAC passes previous_lac (at once when it
// already has), with the entries it made readable; a cancelled watch is
// never answered; a fence answers every watch of the ledger; and when the
// stream ends the bookie forgets its watches.
func TestWatchLacStream(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	for e := range int64(3) {
		addWait(t, b, 1, e, e-1) // ledger 1: LAC 1 stored
	}
	s := c.WatchLac(ctx)
	sendWatches(t, s,
		&bookiev1.LacWatch{Id: 1, LedgerId: 1, PreviousLac: 0, MaxEntryBytes: 1 << 20}, // fires at once
		&bookiev1.LacWatch{Id: 2, LedgerId: 1, PreviousLac: 1, MaxEntryBytes: 1 << 20},
		&bookiev1.LacWatch{Id: 3, LedgerId: 2, PreviousLac: -1},
		&bookiev1.LacWatch{Id: 4, LedgerId: 2, PreviousLac: -1},
		&bookiev1.LacWatch{Id: 5, LedgerId: 3, PreviousLac: -1},
	)
	got := receiveAdvances(t, s, 1)
	if a := got[1]; a == nil || a.GetLac() != 1 || a.GetFenced() || len(a.GetEntries()) != 1 || a.GetEntries()[0].GetEntryId() != 1 ||
		!bytes.Equal(a.GetEntries()[0].GetPayload(), payload(1, 1)) {
		t.Fatalf("first answer: %v; want watch 1 at LAC 1 with entry 1", got)
	}
	if n := b.lacWaiters(); n != 4 {
		t.Fatalf("%d watches registered; want 4", n)
	}

	sendWatches(t, s, &bookiev1.LacWatch{Id: 4, Cancel: true}, &bookiev1.LacWatch{Id: 99, Cancel: true})
	addWait(t, b, 1, 3, 2) // ledger 1: LAC 2 fires watch 2
	addWait(t, b, 2, 0, -1)
	addWait(t, b, 2, 1, 0) // ledger 2: LAC 0 fires watch 3 (4 was cancelled)
	got = receiveAdvances(t, s, 2)
	if a := got[2]; a == nil || a.GetLac() != 2 || len(a.GetEntries()) != 1 || a.GetEntries()[0].GetEntryId() != 2 {
		t.Fatalf("watch 2: %v", a)
	}
	if a := got[3]; a == nil || a.GetLedgerId() != 2 || a.GetLac() != 0 || len(a.GetEntries()) != 0 {
		t.Fatalf("watch 3 (no entries asked): %v", a)
	}

	// A fence answers the ledger's watches though its LAC did not move.
	addWait(t, b, 3, 0, -1)
	if _, err := b.Fence(3, testKey); err != nil {
		t.Fatal(err)
	}
	got = receiveAdvances(t, s, 1)
	if a := got[5]; a == nil || !a.GetFenced() || a.GetLac() != -1 {
		t.Fatalf("watch 5 after the fence: %v", a)
	}
	if n := b.lacWaiters(); n != 0 {
		t.Fatalf("%d watches registered after all were answered or cancelled; want 0", n)
	}

	// Watches left when the client ends the stream are dropped.
	sendWatches(t, s, &bookiev1.LacWatch{Id: 6, LedgerId: 7, PreviousLac: 10}, &bookiev1.LacWatch{Id: 7, LedgerId: 8, PreviousLac: 10})
	waitFor(t, func() bool { return b.lacWaiters() == 2 })
	if err := s.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client's half-close: %v; want the stream's end", err)
	}
	waitFor(t, func() bool { return b.lacWaiters() == 0 })
}

// A watch the bookie cannot take is answered with the reason and the
// stream goes on; a message that breaks the protocol ends it.
func TestWatchLacRefusalsAndProtocolErrors(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	cfg.MaxLacWaiters = 2
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()

	s := c.WatchLac(ctx)
	sendWatches(t, s,
		&bookiev1.LacWatch{Id: 1, LedgerId: 1, PreviousLac: 5},
		&bookiev1.LacWatch{Id: 2, LedgerId: 1, PreviousLac: -2}, // invalid
		&bookiev1.LacWatch{Id: 3, LedgerId: 2, PreviousLac: 5, MaxEntryBytes: -1},
		&bookiev1.LacWatch{Id: 4, LedgerId: 2, PreviousLac: 5},
		&bookiev1.LacWatch{Id: 5, LedgerId: 3, PreviousLac: 5}, // beyond MaxLacWaiters
	)
	got := receiveAdvances(t, s, 3)
	for _, id := range []uint64{2, 3, 5} {
		if got[id].GetRefused() == "" {
			t.Fatalf("watch %d: %v; want refused", id, got[id])
		}
	}
	t.Logf("refusals: %q, %q, %q", got[2].GetRefused(), got[3].GetRefused(), got[5].GetRefused())

	// An id still registered, sent again, ends the stream.
	sendWatches(t, s, &bookiev1.LacWatch{Id: 4, LedgerId: 9, PreviousLac: 0})
	if _, err := s.Receive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("id registered twice: %v; want InvalidArgument", err)
	}
	waitFor(t, func() bool { return b.lacWaiters() == 0 })

	for _, bad := range []*bookiev1.WatchLacRequest{{}, {Watches: make([]*bookiev1.LacWatch, maxWatchesPerMessage+1)}} {
		s := c.WatchLac(ctx)
		for i := range bad.Watches {
			bad.Watches[i] = &bookiev1.LacWatch{Id: uint64(i), LedgerId: 1, Cancel: true}
		}
		if err := s.Send(bad); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if _, err := s.Receive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("message of %d watches: %v; want InvalidArgument", len(bad.Watches), err)
		}
	}
}

// Refusals wait on the stream until its sender answers them; a client that
// never reads its answers cannot pile up more than maxStreamWatches:
// beyond that the stream ends, RESOURCE_EXHAUSTED.
func TestWatchLacStreamBound(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	cfg.MaxLacWaiters = 2
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	s := service{b}
	ls := newLacStream() // no sender: nothing is answered
	for i := range maxStreamWatches(cfg) {
		if err := s.watch(ls, i, &bookiev1.LacWatch{Id: uint64(i), LedgerId: 1, PreviousLac: -2}); err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	err := s.watch(ls, 0, &bookiev1.LacWatch{Id: 1 << 40, LedgerId: 1, PreviousLac: 5})
	if connect.CodeOf(code(err)) != connect.CodeResourceExhausted {
		t.Fatalf("watch beyond the stream's bound: %v; want RESOURCE_EXHAUSTED", err)
	}
}
