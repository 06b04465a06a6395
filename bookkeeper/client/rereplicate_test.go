package client

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/wire"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// A lost bookie's copies of a closed ledger are rebuilt on a spare from
// the survivors, verified, acknowledged there, and only then does the
// catalog point at the spare; the ledger then survives losing a second
// original bookie. A second pass finds nothing to do. With striping
// (Qw < E) only the entries whose write set held the lost bookie move.
func TestRereplicateClosedLedger(t *testing.T) {
	for _, rep := range []catalog.Replication{
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
	} {
		t.Run(repName(rep), func(t *testing.T) {
			cl := newCluster(t, 4)
			cw := cl.client(t)
			w, err := cw.CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
			if err != nil {
				t.Fatal(err)
			}
			const last = 99
			appendN(t, w, 0, last)
			if _, err := w.Close(ctxT(t), 100+last); err != nil {
				t.Fatal(err)
			}
			cl.stopBookie("b1") // lost for good
			cr := cl.client(t)
			res, err := cr.Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil)
			if err != nil {
				t.Fatal(err)
			}
			want := last + 1 // every entry when Qw == E
			if rep.WriteQuorum < rep.Ensemble {
				want = 0
				for e := 0; e <= last; e++ {
					if e%3 == 0 || e%3 == 2 { // positions (e+i) mod 3, i < 2, include 0
						want++
					}
				}
			}
			if !res.Moved || res.Entries != want || !slices.Equal(res.Metadata.Ensembles[0].Bookies, []string{"b4", "b2", "b3"}) {
				t.Fatalf("result %+v; want moved, %d entries, ensemble [b4 b2 b3]", res, want)
			}
			// With Qw = E a window is read with range reads: a few calls,
			// not one per entry.
			if reads := cr.Stats().ReadsSent; rep.WriteQuorum == rep.Ensemble && reads > 4 {
				t.Errorf("%d read calls for %d entries in 2 windows; want range reads", reads, want)
			}
			// The copies are on b4 itself, verified as the writer wrote them.
			b4 := cl.rpc(t, "b4")
			sched := res.Metadata.Replication
			for e := int64(0); e <= last; e++ {
				onB4 := sched.WriteQuorum == sched.Ensemble || e%3 != 1
				got, err := rawRead(t, b4, w.ID(), e)
				if onB4 && (err != nil || string(got.GetPayload()) != string(payload(e))) {
					t.Fatalf("entry %d on b4: %v %q", e, err, got.GetPayload())
				}
			}
			m, err := cl.cat.GetLedger(ctxT(t), w.ID())
			if err != nil || !slices.Equal(m.Ensembles[0].Bookies, []string{"b4", "b2", "b3"}) || m.State != catalog.LedgerClosed || m.LastEntry != last {
				t.Fatalf("catalog after the move: %+v, %v", m, err)
			}
			again, err := cr.Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil)
			if err != nil || again.Moved || again.Entries != 0 {
				t.Fatalf("second pass: %+v, %v; want nothing to do", again, err)
			}
			// A second original bookie lost: every entry still has a copy
			// (Qw = 3: two; Qw = 2: one — the moved one where b1 held it).
			cl.stopBookie("b2")
			readAll(t, cl.client(t), w.ID(), last)
		})
	}
}

// A pass that stops half-way (here: its pacing fails after the first
// window) leaves the catalog as it was — the copies made so far are
// unreferenced — and the next pass completes the move.
func TestRereplicateInterruptedThenRepaired(t *testing.T) {
	cl := newCluster(t, 4)
	rep := catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}
	w, err := cl.client(t).CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	const last = 2*rereplicateWindow + 9
	appendN(t, w, 0, last)
	before, err := w.Close(ctxT(t), 100+last)
	if err != nil {
		t.Fatal(err)
	}
	cl.stopBookie("b3")
	cr := cl.client(t)
	stop := errors.New("pass interrupted")
	windows := 0
	_, err = cr.Rereplicate(ctxT(t), w.ID(), "b3", "b4", func(context.Context, int) error {
		if windows++; windows > 1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("interrupted pass: %v", err)
	}
	if m, err := cl.cat.GetLedger(ctxT(t), w.ID()); err != nil || m.Version != before.Version || !slices.Equal(m.Ensembles[0].Bookies, []string{"b1", "b2", "b3"}) {
		t.Fatalf("an interrupted pass changed the catalog: %+v, %v", m, err)
	}
	res, err := cr.Rereplicate(ctxT(t), w.ID(), "b3", "b4", nil)
	if err != nil || !res.Moved || res.Entries != last+1 {
		t.Fatalf("repairing pass: %+v, %v", res, err)
	}
	cl.stopBookie("b1")
	readAll(t, cl.client(t), w.ID(), last)
}

// Only CLOSED ledgers move: an open ledger's writer owns its chain.
func TestRereplicateRefusesOpenLedgers(t *testing.T) {
	cl := newCluster(t, 4)
	w, err := cl.client(t).CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 3)
	_, err = cl.client(t).Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("open ledger: %v, want ErrInvalidArgument", err)
	}
	if _, err := w.Close(ctxT(t), 103); err != nil {
		t.Fatal(err)
	}
}

// A survivor whose copy fails its checksum is never copied from: the
// entry comes from another replica, or, with none left, the pass fails
// and the catalog keeps the lost bookie (a later pass may find a good
// copy; a bad one is never spread).
func TestRereplicateNeverCopiesACorruptReplica(t *testing.T) {
	cl := newCluster(t, 4)
	rep := catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}
	w, err := cl.client(t).CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	const last = 9
	appendN(t, w, 0, last)
	if _, err := w.Close(ctxT(t), 100+last); err != nil {
		t.Fatal(err)
	}
	cl.stopBookie("b1")
	cl.stopBookie("b2")
	cl.startFake("b2", rottenBookie{}) // asked first: every copy it has is damaged
	cr := cl.client(t)
	res, err := cr.Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil)
	if err != nil || !res.Moved {
		t.Fatalf("move with one rotten survivor: %+v, %v", res, err)
	}
	// The rotten copies were asked for (and refused), and b4 holds the
	// intact ones.
	if cr.Stats().ChecksumFailures == 0 {
		t.Error("no checksum failure counted: the rotten bookie was never read")
	}
	b4 := cl.rpc(t, "b4")
	for e := int64(0); e <= last; e++ {
		if got, err := rawRead(t, b4, w.ID(), e); err != nil || string(got.GetPayload()) != string(payload(e)) {
			t.Fatalf("entry %d on b4: %v %q", e, err, got.GetPayload())
		}
	}
	// Now b3 is lost too: b4's copies are good, b2's are rotten; moving
	// b3's copies to b1's replacement finds only b4 (fine). But moving
	// b4's copies with b3 gone leaves only the rotten b2: refused.
	cl.stopBookie("b3")
	m, _ := cl.cat.GetLedger(ctxT(t), w.ID())
	if _, err := cr.Rereplicate(ctxT(t), w.ID(), "b4", "b1", nil); err == nil || !errors.Is(err, ErrChecksum) {
		t.Fatalf("move with only a rotten copy left: %v, want a checksum error", err)
	}
	if after, _ := cl.cat.GetLedger(ctxT(t), w.ID()); after.Version != m.Version {
		t.Fatalf("a failed move changed the catalog: %+v", after)
	}
}

// rottenBookie answers every read with the entry's payload damaged under
// the checksum of the intact one.
type rottenBookie struct {
	bookiev1connect.UnimplementedBookieServiceHandler
}

func (rottenBookie) GetStatus(context.Context, *connect.Request[bookiev1.GetStatusRequest]) (*connect.Response[bookiev1.GetStatusResponse], error) {
	return connect.NewResponse(&bookiev1.GetStatusResponse{BookieId: "b2", InstanceId: "test"}), nil
}

func (rottenBookie) ReadEntries(_ context.Context, req *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	e := req.Msg.GetFirstEntry()
	good := payload(e)
	bad := slices.Clone(good)
	bad[0] ^= 0xff
	return connect.NewResponse(&bookiev1.ReadEntriesResponse{Lac: e, Entries: []*bookiev1.Entry{{
		EntryId: e, Lac: e - 1, Payload: bad, Crc32C: wire.EntryChecksum(req.Msg.GetLedgerId(), e, e-1, good),
	}}}), nil
}

// A reader opened before the moves reads a CLOSED ledger whose every
// original copy of some entries is gone: it refreshes the metadata once
// and finds the moved copies (striping: entries on {b1, b2} only).
func TestReaderFollowsMovedReplicas(t *testing.T) {
	cl := newCluster(t, 5)
	rep := catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}
	w, err := cl.client(t).CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	const last = 11
	appendN(t, w, 0, last)
	if _, err := w.Close(ctxT(t), 100+last); err != nil {
		t.Fatal(err)
	}
	reader := cl.client(t)
	r, err := reader.OpenReader(ctxT(t), w.ID()) // metadata [b1 b2 b3], cached
	if err != nil {
		t.Fatal(err)
	}
	mover := cl.client(t)
	cl.stopBookie("b1")
	if _, err := mover.Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil); err != nil {
		t.Fatal(err)
	}
	cl.stopBookie("b2")
	if _, err := mover.Rereplicate(ctxT(t), w.ID(), "b2", "b5", nil); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctxT(t), 0, last)
	if err != nil {
		t.Fatalf("a reader with the old metadata: %v", err)
	}
	for _, e := range got {
		if string(e.Payload) != string(payload(e.ID)) {
			t.Fatalf("entry %d = %q", e.ID, e.Payload)
		}
	}
	if len(got) != last+1 {
		t.Fatalf("read %d entries, want %d", len(got), last+1)
	}
}

// Windows are bounded in bytes as well as entries: a ledger of large
// entries is moved in windows of about rereplicateWindowBytes, never all
// of it held at once, and every entry arrives intact.
func TestRereplicateWindowsAreBoundedInBytes(t *testing.T) {
	cl := newCluster(t, 4)
	rep := catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}
	// 24 MiB written three times can take seconds on a loaded machine:
	// a generous add timeout keeps the ensemble as created (b4 is the
	// target, so it must not join the ledger by an ensemble change).
	patient := func(c *Config) { c.AddTimeout = 2 * time.Minute }
	w, err := cl.client(t, patient).CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 24, 1000 << 10
	big := func(e int) []byte { return bytes.Repeat([]byte{byte(e)}, size) }
	for e := range n {
		if _, err := w.Append(ctxT(t), big(e)); err != nil {
			t.Fatal(err)
		}
	}
	md, err := w.Close(ctxT(t), 100+n-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Ensembles) != 1 {
		t.Fatalf("the ensemble changed while writing (%v): the test needs the ledger on b1-b3 only", md.Ensembles)
	}
	cl.stopBookie("b1")
	var windows []int
	res, err := cl.client(t).Rereplicate(ctxT(t), w.ID(), "b1", "b4", func(_ context.Context, b int) error {
		windows = append(windows, b)
		return nil
	})
	if err != nil || !res.Moved || res.Entries != n {
		t.Fatalf("%+v, %v", res, err)
	}
	if len(windows) < 2 {
		t.Fatalf("%d MiB moved in %d window(s): %v", n*size>>20, len(windows), windows)
	}
	for _, b := range windows {
		if b > rereplicateWindowBytes+size {
			t.Errorf("a window of %d bytes, bound %d (+ one entry)", b, rereplicateWindowBytes)
		}
	}
	b4 := cl.rpc(t, "b4")
	for e := range n {
		if got, err := rawRead(t, b4, w.ID(), int64(e)); err != nil || !bytes.Equal(got.GetPayload(), big(e)) {
			t.Fatalf("entry %d on b4: %v", e, err)
		}
	}
}

// busyOnce is a handler interceptor that answers the first add of every
// entry of the AddEntries streams through it REJECTED (as a bookie whose
// write buffer is full does), whatever the bookie did with it.
type busyOnce struct {
	mu   sync.Mutex
	seen map[int64]bool
	n    int // adds answered REJECTED
}

func (*busyOnce) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (*busyOnce) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}
func (b *busyOnce) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return next(ctx, &busyConn{StreamingHandlerConn: conn, b: b})
	}
}

type busyConn struct {
	connect.StreamingHandlerConn
	b *busyOnce
}

func (c *busyConn) Send(msg any) error {
	if resp, ok := msg.(*bookiev1.AddEntriesResponse); ok {
		c.b.mu.Lock()
		for _, l := range resp.GetLedgers() {
			for _, r := range l.GetResults() {
				if r.GetStatus() == bookiev1.AddStatus_ADD_STATUS_OK && !c.b.seen[r.GetEntryId()] {
					c.b.seen[r.GetEntryId()] = true
					r.Status = bookiev1.AddStatus_ADD_STATUS_REJECTED
					c.b.n++
				}
			}
		}
		c.b.mu.Unlock()
	}
	return c.StreamingHandlerConn.Send(msg)
}

// A new bookie that turns adds away for a passing reason (REJECTED: its
// buffer is full) gets them again after a backoff: the move completes.
func TestRereplicateRetriesRejectedAdds(t *testing.T) {
	cl := newCluster(t, 3)
	busy := &busyOnce{seen: map[int64]bool{}}
	cl.startBookie("b4", connect.WithInterceptors(busy))
	rep := catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}
	w, err := cl.client(t).CreateLedger(ctxT(t), spec(rep, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 6)
	m, err := w.Close(ctxT(t), 106)
	if err != nil {
		t.Fatal(err)
	}
	n := int(m.LastEntry + 1)
	cl.stopBookie("b1")
	res, err := cl.client(t).Rereplicate(ctxT(t), w.ID(), "b1", "b4", nil)
	if err != nil || !res.Moved || res.Entries != n {
		t.Fatalf("Rereplicate with a busy target = %+v, %v; want %d entries moved", res, err, n)
	}
	busy.mu.Lock()
	defer busy.mu.Unlock()
	if busy.n != n {
		t.Fatalf("%d adds turned away, want %d (one per entry)", busy.n, n)
	}
}
