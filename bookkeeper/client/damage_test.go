package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// A reader that finds a copy of a CLOSED ledger bad reads around it and
// marks it in the catalog once — not once per bad entry: a copy returning
// corrupt entries (checksum), and a copy that lost the ledger (the bookie
// answers that it has no such entry: missing), and a bookie that finds its
// own copy corrupt (DATA_LOSS). A copy short only for a moment is not
// marked (the report is confirmed by reading again), nor an OPEN
// ledger's, nor any with DisableDamageReports.
func TestReadersMarkDamagedCopies(t *testing.T) {
	cl := newCluster(t, 3)
	wc := cl.client(t)
	corruptID := closedLedger(t, wc, 29)
	lostID := closedLedger(t, wc, 29)

	// b1 is the first replica of every entry (ReadOrder), so every read
	// meets the bad copy first.
	corrupt := new(atomic.Bool)
	corrupt.Store(true)
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	b1 := cl.bookies["b1"].addr
	dial := func(cfg *Config) {
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			bc := grpcDialer(hc, false, 8<<20)(addr)
			if addr == b1 {
				return corrupting{BookieServiceClient: bc, on: corrupt}
			}
			return bc
		}
	}
	quiet := cl.client(t, dial, func(cfg *Config) { cfg.DisableDamageReports = true })
	readAll(t, quiet, corruptID, 29)
	rc := cl.client(t, dial)
	readAll(t, rc, corruptID, 29)
	readAll(t, rc, corruptID, 29) // again: reported once
	want := catalog.DamagedCopy{Bookie: "b1", Entry: 0, Reason: catalog.DamageChecksum}
	eventually(t, "the checksum mark", func() bool { return hasMark(t, cl, corruptID, want) })
	if s := rc.Stats(); s.DamageReports != 1 || s.ChecksumFailures < 60 {
		t.Fatalf("stats %+v; want 1 damage report for 60 bad entries read", s)
	}
	if s := quiet.Stats(); s.DamageReports != 0 {
		t.Fatalf("a client with DisableDamageReports reported %d", s.DamageReports)
	}

	// The copy on b2 of the other ledger is gone (as from a wiped disk).
	corrupt.Store(false)
	if _, err := cl.rpc(t, "b1").DeleteLedger(ctxT(t), connect.NewRequest(&bookiev1.DeleteLedgerRequest{LedgerId: int64(lostID)})); err != nil {
		t.Fatal(err)
	}
	readAll(t, rc, lostID, 29)
	want = catalog.DamagedCopy{Bookie: "b1", Entry: 0, Reason: catalog.DamageMissing}
	eventually(t, "the missing mark", func() bool { return hasMark(t, cl, lostID, want) })

	// A bookie that finds its own copy corrupt answers DATA_LOSS.
	lossID := closedLedger(t, wc, 9)
	lc := cl.client(t, func(cfg *Config) {
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			bc := grpcDialer(hc, false, 8<<20)(addr)
			if addr == b1 {
				return dataLoss{bc}
			}
			return bc
		}
	})
	readAll(t, lc, lossID, 9)
	want = catalog.DamagedCopy{Bookie: "b1", Entry: 0, Reason: catalog.DamageChecksum}
	eventually(t, "the data-loss mark", func() bool { return hasMark(t, cl, lossID, want) })

	// A copy short for a moment (as the third member of a write set is
	// right after a recovery closed the ledger): the confirmation read
	// finds the entry, and nothing is marked.
	shortID := closedLedger(t, wc, 9)
	answered := new(atomic.Int64)
	sc := cl.client(t, func(cfg *Config) {
		cfg.Dial = func(addr string) bookiev1connect.BookieServiceClient {
			bc := grpcDialer(hc, false, 8<<20)(addr)
			if addr == b1 {
				return notYet{bc, answered}
			}
			return bc
		}
	})
	readAll(t, sc, shortID, 9)
	eventually(t, "the confirmation read", func() bool { return answered.Load() >= 2 })
	time.Sleep(100 * time.Millisecond)
	if m, err := cl.cat.GetLedger(ctxT(t), shortID); err != nil || len(m.Damaged) != 0 || sc.Stats().DamageReports != 0 {
		t.Fatalf("a copy short for a moment was marked: %+v, %v", m.Damaged, err)
	}

	// An OPEN ledger: its entries up to the LAC read from b2 and b3 only,
	// and no mark (the ledger cannot carry one).
	w, err := wc.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 9)
	corrupt.Store(true)
	before := rc.Stats().DamageReports
	r, err := rc.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PollLAC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if ents, err := r.Read(ctxT(t), 0, r.LAC()); err != nil || len(ents) == 0 {
		t.Fatalf("read of the open ledger: %d entries, %v", len(ents), err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := rc.Stats().DamageReports; got != before {
		t.Fatalf("an OPEN ledger's copy was reported (%d reports, %d before)", got, before)
	}
}

// hasMark reports whether ledger id's record carries want (its time aside).
func hasMark(t *testing.T, cl *cluster, id catalog.LedgerID, want catalog.DamagedCopy) bool {
	t.Helper()
	m, err := cl.cat.GetLedger(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := m.DamagedOn(want.Bookie)
	if ok && (d.Entry != want.Entry || d.Reason != want.Reason || d.At.IsZero() || len(m.Damaged) != 1) {
		t.Fatalf("ledger %d marks %+v; want only %+v", id, m.Damaged, want)
	}
	return ok
}

// dataLoss answers every read as a bookie does whose stored entry fails
// its own verification.
type dataLoss struct {
	bookiev1connect.BookieServiceClient
}

func (dataLoss) ReadEntries(context.Context, *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	return nil, connect.NewError(connect.CodeDataLoss, errors.New("entry failed verification"))
}

// notYet answers the first read NOT_FOUND, as a bookie that has not got
// the entry yet, and passes the others on; reads counts them.
type notYet struct {
	bookiev1connect.BookieServiceClient
	reads *atomic.Int64
}

func (n notYet) ReadEntries(ctx context.Context, req *connect.Request[bookiev1.ReadEntriesRequest]) (*connect.Response[bookiev1.ReadEntriesResponse], error) {
	if n.reads.Add(1) == 1 {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such entry"))
	}
	return n.BookieServiceClient.ReadEntries(ctx, req)
}
