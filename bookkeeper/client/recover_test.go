package client

import (
	"context"
	"errors"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Recovery of a ledger whose writer is still appending: the writer's later
// appends fail with ErrFenced, the recovered end covers every acknowledged
// entry, and everything up to the end reads back.
func TestRecoveryFencesRunningWriter(t *testing.T) {
	for _, rep := range []catalog.Replication{
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
	} {
		t.Run(repName(rep), func(t *testing.T) {
			cl := newCluster(t, 3)
			cw, cr := cl.client(t), cl.client(t)
			w, err := cw.CreateLedger(ctxT(t), spec(rep))
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, w, 0, 19)
			var mu sync.Mutex
			acked := int64(19)
			stopped := make(chan error, 1)
			go func() {
				for e := int64(20); ; e++ {
					// Pipelined: several entries in flight when the fence lands.
					got, err := w.Append(context.Background(), payload(e))
					if err != nil {
						stopped <- err
						return
					}
					mu.Lock()
					acked = got
					mu.Unlock()
				}
			}()
			eventually(t, "appends under way", func() bool { mu.Lock(); defer mu.Unlock(); return acked >= 40 })
			m, err := cr.Recover(ctxT(t), w.ID(), lastOffsetOf(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := <-stopped; !errors.Is(err, ledger.ErrFenced) {
				t.Fatalf("old writer stopped with %v, want ErrFenced", err)
			}
			mu.Lock()
			last := acked
			mu.Unlock()
			if m.State != catalog.LedgerClosed || m.LastEntry < last || m.LastOffset != 100+m.LastEntry {
				t.Fatalf("recovered %+v; last acknowledged entry %d", m, last)
			}
			readAll(t, cr, w.ID(), m.LastEntry)
			if _, err := w.Close(ctxT(t), 100+last); !errors.Is(err, ledger.ErrFenced) {
				t.Fatalf("old writer's Close: %v", err)
			}
			if got, err := cr.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); err != nil || got.Version != m.Version {
				t.Fatalf("recovering a closed ledger: %+v, %v", got, err)
			}
		})
	}
}

// Two recoveries racing agree on one catalog result; only one stores it.
func TestConcurrentRecoveriesAgree(t *testing.T) {
	cl := newCluster(t, 3)
	cw := cl.client(t)
	w, err := cw.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 9)
	w.Abort()
	clients := []*Client{cl.client(t), cl.client(t), cl.client(t)}
	results := make([]catalog.LedgerMetadata, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { results[i], errs[i] = c.Recover(ctxT(t), w.ID(), lastOffsetOf(100)) })
	}
	wg.Wait()
	recovered := int64(0)
	for i := range clients {
		if errs[i] != nil {
			t.Fatalf("recovery %d: %v", i, errs[i])
		}
		r := results[i]
		if r.Version != results[0].Version || r.LastEntry != results[0].LastEntry || r.LastOffset != results[0].LastOffset || r.State != catalog.LedgerClosed {
			t.Fatalf("recovery %d: %+v; recovery 0: %+v", i, r, results[0])
		}
		recovered += clients[i].Stats().LedgersRecovered
	}
	if results[0].LastEntry != 9 || results[0].LastOffset != 109 || recovered != 1 {
		t.Fatalf("recovered %+v, %d stores", results[0], recovered)
	}
	readAll(t, clients[0], w.ID(), 9)
}

// An entry the old writer got onto Qa bookies may have been acknowledged
// (the writer died before telling anyone): recovery keeps it, writes it
// back to its whole write set, and the entry on no bookie ends the ledger.
func TestRecoveryKeepsEntryOnAckQuorum(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	m := w.Metadata()
	w.Abort()
	rawAdd(t, cl, "b1", m, 5, 4)
	rawAdd(t, cl, "b2", m, 5, 4)
	got, err := c.Recover(ctxT(t), w.ID(), lastOffsetOf(100))
	if err != nil {
		t.Fatal(err)
	}
	if got.LastEntry != 5 || got.LastOffset != 105 {
		t.Fatalf("recovered %+v", got)
	}
	if _, err := rawRead(t, cl.rpc(t, "b3"), w.ID(), 5); err != nil { // written back to the whole write set
		t.Errorf("entry 5 not re-replicated to b3: %v", err)
	}
	readAll(t, c, w.ID(), 5)
}

// When every entry is at or below the LAC the bookies report, recovery
// reads nothing past it and the client reads the last entry itself for
// its offset. A bookie down does not stop recovery (coverage holds).
func TestRecoveryAtLACWithBookieDown(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 9)
	for _, b := range []string{"b1", "b2", "b3"} {
		eventually(t, "LAC 9 pushed to "+b, func() bool { return rawLac(t, cl, b, w.ID()) == 9 })
	}
	w.Abort()
	cl.stopBookie("b3")
	got, err := c.Recover(ctxT(t), w.ID(), lastOffsetOf(100))
	if err != nil {
		t.Fatal(err)
	}
	if got.LastEntry != 9 || got.LastOffset != 109 {
		t.Fatalf("recovered %+v", got)
	}
}

// An empty open ledger recovers empty, without calling lastOffset.
func TestRecoverEmpty(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	got, err := c.Recover(ctxT(t), w.ID(), func(int64, []byte) (int64, error) {
		t.Error("lastOffset called for an empty ledger")
		return 0, nil
	})
	if err != nil || got.LastEntry != -1 || got.LastOffset != 99 || got.State != catalog.LedgerClosed {
		t.Fatalf("recovered %+v, %v", got, err)
	}
}

// With too many bookies down to decide, recovery fails (bounded retries)
// and leaves the ledger IN_RECOVERY; it succeeds once they are back — here,
// once a write set is covered again.
func TestRecoveryFailsWithoutCoverage(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.RecoveryAttempts = 2 })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 3)
	w.Abort()
	cl.stopBookie("b2")
	cl.stopBookie("b3")
	if _, err := c.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); !errors.Is(err, ledger.ErrRecoveryFailed) {
		t.Fatalf("recovery with 2 of 3 bookies down: %v", err)
	}
	m, err := cl.cat.GetLedger(ctxT(t), w.ID())
	if err != nil || m.State != catalog.LedgerInRecovery {
		t.Fatalf("after failed recovery: %+v, %v", m, err)
	}
}

func repName(r catalog.Replication) string {
	return "E" + itoa(r.Ensemble) + "Qw" + itoa(r.WriteQuorum) + "Qa" + itoa(r.AckQuorum)
}

func itoa(n int) string { return string(rune('0' + n)) }

// rawAdd stores entry e (payload(e), carrying lac) on one bookie, as a
// writer's add that reached only that bookie.
func rawAdd(t testing.TB, cl *cluster, b string, m catalog.LedgerMetadata, e, lac int64) {
	t.Helper()
	p := payload(e)
	s := cl.rpc(t, b).AddEntries(ctxT(t))
	if err := s.Send(&bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{{
		LedgerId: int64(m.ID), MasterKey: MasterKey(m), Adds: []*bookiev1.Add{{
			EntryId: e, Lac: lac, Payload: p, Crc32C: wire.EntryChecksum(int64(m.ID), e, lac, p),
		}},
	}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Receive()
	if err != nil || len(resp.GetLedgers()) != 1 || len(resp.GetLedgers()[0].GetResults()) != 1 ||
		resp.GetLedgers()[0].GetResults()[0].GetStatus() != bookiev1.AddStatus_ADD_STATUS_OK {
		t.Fatalf("raw add %d to %s: %v, %v", e, b, resp, err)
	}
	_ = s.CloseRequest()
	_ = s.CloseResponse()
}

func rawLac(t testing.TB, cl *cluster, b string, id catalog.LedgerID) int64 {
	resp, err := cl.rpc(t, b).ReadLac(ctxT(t), connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: int64(id), PreviousLac: -1}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetLac()
}
