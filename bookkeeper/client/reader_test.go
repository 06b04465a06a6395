package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// An entry stored on every bookie but beyond the LAC (not acknowledged) is
// never returned while the ledger is open; after recovery closes the ledger
// past it, it is.
func TestReaderNeverBeyondLAC(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w := ledgerAtLAC4(t, cl, c)
	abortWithEntryBeyondLAC(t, cl, w)
	r, err := c.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := r.Read(ctxT(t), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 5 || ents[4].ID != 4 {
		t.Fatalf("read %d entries, last %d; want 0..4", len(ents), ents[len(ents)-1].ID)
	}
	if _, err := r.Read(ctxT(t), 5, 5); !errors.Is(err, ledger.ErrNotReadable) {
		t.Fatalf("read beyond the LAC: %v", err)
	}
	if _, err := c.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Refresh(ctxT(t)); err != nil || m.LastEntry != 5 {
		t.Fatalf("refresh: %+v, %v", m, err)
	}
	if ents, err := r.Read(ctxT(t), 5, 100); err != nil || len(ents) != 1 || string(ents[0].Payload) != string(payload(5)) {
		t.Fatalf("read after close: %v, %v", ents, err)
	}
	if lac, err := r.WaitLAC(ctxT(t), 5); !errors.Is(err, ErrLedgerSealed) || lac != 5 {
		t.Fatalf("WaitLAC at the end of a closed ledger: %d, %v", lac, err)
	}
}

// A tail reader follows a writer: WaitLAC wakes on new entries (the long
// poll, not the poll round, which is far longer here), and nothing it reads
// was not yet acknowledged.
func TestTailReader(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.LacPollTimeout = 20 * time.Second; cfg.MetadataRefreshInterval = time.Minute })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan int64, 1)
	go func() {
		lac, err := r.WaitLAC(ctxT(t), -1)
		if err != nil {
			t.Error(err)
		}
		woke <- lac
	}()
	start := time.Now()
	appendN(t, w, 0, 0)
	if lac := <-woke; lac != 0 {
		t.Fatalf("WaitLAC woke at %d", lac)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitLAC took %v to see the first entry", d)
	}

	const n = 200
	go func() {
		for e := int64(1); e < n; e++ {
			if _, err := w.Append(context.Background(), payload(e)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	next := int64(0)
	for next < n {
		lac, err := r.WaitLAC(ctxT(t), next-1)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := r.Read(ctxT(t), next, lac)
		if err != nil {
			t.Fatal(err)
		}
		acked := w.LAC() // read after: the writer acknowledged everything returned
		for _, e := range ents {
			if e.ID != next || string(e.Payload) != string(payload(e.ID)) {
				t.Fatalf("read entry %d %q, want %d", e.ID, e.Payload, next)
			}
			if e.ID > acked {
				t.Fatalf("read entry %d beyond the writer's acknowledged %d", e.ID, acked)
			}
			next++
		}
	}
	if _, err := w.Close(ctxT(t), 100+n-1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Refresh(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitLAC(ctxT(t), n-1); !errors.Is(err, ErrLedgerSealed) {
		t.Fatalf("WaitLAC after close: %v", err)
	}
}

// Read returns at most MaxReadBytes (at least one entry), in order.
func TestReadBytesBound(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.MaxReadBytes = 100; cfg.ReadAhead = 4 })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 19)
	if _, err := w.Close(ctxT(t), 119); err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := r.Read(ctxT(t), 0, 19)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for i, e := range ents {
		size += len(e.Payload)
		if e.ID != int64(i) {
			t.Fatalf("entry %d at %d", e.ID, i)
		}
	}
	if size > 100 || len(ents) == 0 || len(ents) == 20 {
		t.Fatalf("read %d entries, %d bytes", len(ents), size)
	}
	readAll(t, c, w.ID(), 19) // in several Reads
}

// A replica that returns corrupt entries is detected (checksum), counted,
// and read around; with every replica corrupt the read fails.
func TestChecksumMismatch(t *testing.T) {
	cl := newCluster(t, 3)
	id := closedLedger(t, cl.client(t), 29)

	corrupt := map[string]*atomic.Bool{}
	for _, b := range []string{"b1", "b2", "b3"} {
		corrupt[cl.bookies[b].addr] = new(atomic.Bool)
	}
	corrupt[cl.bookies["b1"].addr].Store(true)
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	rc := cl.client(t, func(cfg *Config) {
		cfg.SpeculativeReadTimeout = time.Minute // every read waits for its first replica
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			return corrupting{BookieServiceClient: grpcDialer(hc, false, 8<<20)(addr), on: corrupt[addr]}
		}
	})
	readAll(t, rc, id, 29)
	// b1 is the first replica of all 30 entries (ledger.Schedule.ReadOrder
	// asks runs of entries of one bookie), read by one range read: every
	// corrupt entry is counted, and read again from the next replica.
	if s := rc.Stats(); s.ChecksumFailures < 30 {
		t.Fatalf("checksum failures %d; want one for each of the 30 entries b1 serves first", s.ChecksumFailures)
	}
	for _, on := range corrupt {
		on.Store(true)
	}
	r, err := rc.OpenReader(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctxT(t), 0, 0); !errors.Is(err, ledger.ErrEntryUnavailable) {
		t.Fatalf("read with every replica corrupt: %v", err)
	}
}

// corrupting flips a payload byte in every entry it reads while on.
type corrupting struct {
	bookiev1connect.BookieServiceClient
	on *atomic.Bool
}

func (c corrupting) ReadEntries(ctx context.Context, req *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	resp, err := c.BookieServiceClient.ReadEntries(ctx, req)
	if err == nil && c.on.Load() {
		for _, e := range resp.Msg.GetEntries() {
			p := slices.Clone(e.GetPayload())
			p[0] ^= 0x20
			e.Payload = p
		}
	}
	return resp, err
}

// A replica that does not answer reads is read around after
// SpeculativeReadTimeout, without waiting for ReadTimeout.
func TestSpeculativeRead(t *testing.T) {
	cl := newCluster(t, 3)
	id := closedLedger(t, cl.client(t), 8)
	slow := cl.bookies["b1"].addr // the first replica of entries 0..ReadRun-1 (ledger.Schedule.ReadOrder)
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	rc := cl.client(t, func(cfg *Config) {
		cfg.ReadTimeout = time.Minute
		cfg.SpeculativeReadTimeout = 10 * time.Millisecond
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			bc := grpcDialer(hc, false, 8<<20)(addr)
			if addr == slow {
				return hanging{bc}
			}
			return bc
		}
	})
	start := time.Now()
	readAll(t, rc, id, 8)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("reads took %v", d)
	}
	if s := rc.Stats(); s.SpeculativeReads < 3 {
		t.Fatalf("speculative reads %d", s.SpeculativeReads)
	}
}

// hanging never answers reads (until cancelled).
type hanging struct {
	bookiev1connect.BookieServiceClient
}

func (hanging) ReadEntries(ctx context.Context, _ *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	<-ctx.Done()
	return nil, connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
}

// Consecutive entries are read from one bookie with range reads — a few
// RPCs for a hundred entries, not one each — and a replica that lacks an
// entry in the middle of a run (it answers the run up to the gap, and
// NOT_FOUND for the gap) is read around for that entry only.
func TestRangeReads(t *testing.T) {
	cl := newCluster(t, 3)
	id := closedLedger(t, cl.client(t), 99)
	rc := cl.client(t)
	readAll(t, rc, id, 99)
	if s := rc.Stats(); s.ReadsSent > 10 {
		t.Fatalf("%d ReadEntries calls for 100 entries; want range reads (at most 10)", s.ReadsSent)
	}

	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	lacking := cl.bookies["b1"].addr // the first replica of entries 0..63
	gc := cl.client(t, func(cfg *Config) {
		cfg.SpeculativeReadTimeout = time.Minute // only the gap may send a read elsewhere
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			bc := grpcDialer(hc, false, 8<<20)(addr)
			if addr == lacking {
				return gapped{BookieServiceClient: bc, gap: 5}
			}
			return bc
		}
	})
	readAll(t, gc, id, 99)
	t.Logf("range reads: %d calls clean, %d with a gap", rc.Stats().ReadsSent, gc.Stats().ReadsSent)
	if s := gc.Stats(); s.ReadsSent > 12 || s.ChecksumFailures != 0 {
		t.Fatalf("stats %+v: want a few range reads and no checksum failure", s)
	}
}

// gapped answers as a bookie that never had entry gap: a range stops
// before it, and a read starting at it is NOT_FOUND.
type gapped struct {
	bookiev1connect.BookieServiceClient
	gap int64
}

func (g gapped) ReadEntries(ctx context.Context, req *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	m := req.Msg
	if m.GetFirstEntry() == g.gap {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no entry %d", g.gap))
	}
	if m.GetFirstEntry() < g.gap && m.GetLastEntry() >= g.gap {
		m = &bookiev1.ReadEntriesRequest{LedgerId: m.GetLedgerId(), FirstEntry: m.GetFirstEntry(), LastEntry: g.gap - 1, MaxBytes: m.GetMaxBytes()}
		req = connect.NewRequest(m)
	}
	return g.BookieServiceClient.ReadEntries(ctx, req)
}

// closedLedger writes entries 0..last (offsets 100 + entry) to a ledger on
// b1, b2, b3 and closes it.
func closedLedger(t testing.TB, c *Client, last int64) catalog.LedgerID {
	t.Helper()
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, last)
	if _, err := w.Close(ctxT(t), 100+last); err != nil {
		t.Fatal(err)
	}
	return w.ID()
}

// A bookie restarted after an idle writer's last LAC push knows only the
// LAC its last entry carried (explicit LACs are not journaled), and the
// idle writer pushes no more. A one-off LAC question still learns the end
// the other bookies know: it asks every bookie, not the first to answer.
func TestPollLACTakesTheHighestBookie(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w := ledgerAtLAC4(t, cl, c)
	cl.crashBookie("b1")
	cl.restartBookie("b1")
	if lac := rawLac(t, cl, "b1", w.ID()); lac != 3 {
		t.Fatalf("restarted bookie's LAC = %d, want 3 (the LAC entry 4 carried)", lac)
	}
	// Fresh clients: none has learned which bookie answers first.
	for i := range 5 {
		r, err := cl.client(t).OpenReader(ctxT(t), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if lac, err := r.PollLAC(ctxT(t)); err != nil || lac != 4 {
			t.Fatalf("reader %d: PollLAC = %d, %v; want 4", i, lac, err)
		}
		if ents, err := r.Read(ctxT(t), 4, 4); err != nil || len(ents) != 1 {
			t.Fatalf("reader %d: read entry 4: %v, %v", i, ents, err)
		}
	}
	w.Abort()
}

// Every bookie of an idle ledger restarts after the writer's last explicit
// LAC push: each knows only the LAC its last entry carried. The writer,
// still open, hears its streams break and pushes its LAC again once they
// are back, so a reader sees the last entry without another add.
func TestIdleWriterPushesLACAgainAfterBookiesRestart(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	appendN(t, w, 0, 4)
	for _, b := range []string{"b1", "b2", "b3"} {
		eventually(t, "LAC 4 pushed to "+b, func() bool { return rawLac(t, cl, b, w.ID()) == 4 })
	}
	for _, b := range []string{"b1", "b2", "b3"} {
		cl.crashBookie(b)
		cl.restartBookie(b)
	}
	if lac := rawLac(t, cl, "b1", w.ID()); lac > 3 {
		t.Fatalf("restarted bookie's LAC = %d; the test needs it to have lost the explicit push", lac)
	}
	rc := cl.client(t)
	eventually(t, "a reader's LAC back at 4", func() bool {
		r, err := rc.OpenReader(ctxT(t), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		lac, err := r.PollLAC(ctxT(t))
		return err == nil && lac == 4
	})
}

// A recovery closes an open ledger past the LAC its bookies know (entry 5
// was on every bookie, beyond the LAC): a reader's one-off LAC question
// then hears "fenced" and reports the closed end, not the bookies' LAC.
func TestPollLACAfterRecoveryReportsTheClosedEnd(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w := ledgerAtLAC4(t, cl, c)
	abortWithEntryBeyondLAC(t, cl, w)
	r, err := cl.client(t).OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if lac, err := r.PollLAC(ctxT(t)); err != nil || lac != 4 {
		t.Fatalf("PollLAC before recovery = %d, %v; want 4", lac, err)
	}
	if _, err := c.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); err != nil {
		t.Fatal(err)
	}
	if lac, err := r.PollLAC(ctxT(t)); err != nil || lac != 5 {
		t.Fatalf("PollLAC after recovery = %d, %v; want 5, the closed end", lac, err)
	}
}

// ledgerAtLAC4 creates a ledger on b1..b3 with entries 0..4, and waits until
// every bookie knows LAC 4 (the idle writer's explicit push).
func ledgerAtLAC4(t *testing.T, cl *cluster, c *Client) *Writer {
	t.Helper()
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	for _, b := range []string{"b1", "b2", "b3"} {
		eventually(t, "LAC 4 pushed to "+b, func() bool { return rawLac(t, cl, b, w.ID()) == 4 })
	}
	return w
}

// abortWithEntryBeyondLAC stops w's writer and stores entry 5 on every
// bookie without acknowledging it (LAC stays 4), as a writer that died
// mid-add leaves it.
func abortWithEntryBeyondLAC(t *testing.T, cl *cluster, w *Writer) {
	t.Helper()
	m := w.Metadata()
	w.Abort()
	for _, b := range []string{"b1", "b2", "b3"} {
		rawAdd(t, cl, b, m, 5, 4)
	}
}
