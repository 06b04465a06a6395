package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Ledgers still on bookies that name a bookie missing from the registry
// are listed (and ListBookies counts each bookie's ledgers, missing ones
// included) — OPEN, IN_RECOVERY and CLOSED, in state then id order, with
// the missing bookies — and CLOSED ledgers with copies marked damaged,
// with the marks, page by page with no ledger lost or repeated at any
// page size; OFFLOADED ledgers and healthy ledgers on live bookies are not.
func TestListUnderReplicatedLedgers(t *testing.T) {
	ctx := context.Background()
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for _, b := range []string{"b1", "b2", "b3"} {
		if _, err := cat.HeartbeatBookie(ctx, catalog.Bookie{ID: b, Address: b + ":1"}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cat.CreateTopic(ctx, "orders", 1, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.HeartbeatOwner(ctx, "ingest-a", "127.0.0.1:1", time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := cat.AcquireWriter(ctx, "orders", 0, "ingest-a")
	if err != nil {
		t.Fatal(err)
	}
	l := p.Lease()
	ledger := func(ensemble []string, state catalog.LedgerState) catalog.LedgerID {
		m, err := cat.CreateLedger(ctx, catalog.LedgerSpec{Topic: l.Topic, TopicID: l.TopicID, Partition: 0, Replication: catalog.DefaultReplication,
			Ensemble: ensemble, FirstOffset: 0, WriterOwner: l.Owner, WriterEpoch: l.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		if state != catalog.LedgerOpen {
			m.State = state
			if state == catalog.LedgerClosed {
				m.LastEntry, m.LastOffset = 0, 9
			}
			if m, err = cat.UpdateLedger(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if state == catalog.LedgerOffloaded {
			t.Fatal("not in this test")
		}
		return m.ID
	}
	want := map[catalog.LedgerID][]string{}
	ledger([]string{"b1", "b2", "b3"}, catalog.LedgerClosed) // healthy
	want[ledger([]string{"b1", "gone1", "b3"}, catalog.LedgerClosed)] = []string{"gone1"}
	want[ledger([]string{"gone2", "b2", "gone1"}, catalog.LedgerOpen)] = []string{"gone2", "gone1"}
	ledger([]string{"b1", "b2", "b3"}, catalog.LedgerOpen) // healthy
	want[ledger([]string{"b1", "b2", "gone2"}, catalog.LedgerInRecovery)] = []string{"gone2"}
	want[ledger([]string{"gone3", "b2", "b3"}, catalog.LedgerClosed)] = []string{"gone3"}
	// A copy a reader found bad on a live bookie.
	damagedID := ledger([]string{"b1", "b2", "b3"}, catalog.LedgerClosed)
	dm, err := cat.GetLedger(ctx, damagedID)
	if err != nil {
		t.Fatal(err)
	}
	dm.Damaged = []catalog.DamagedCopy{{Bookie: "b2", Entry: 0, Reason: catalog.DamageChecksum, At: time.UnixMilli(1234)}}
	if _, err := cat.UpdateLedger(ctx, dm); err != nil {
		t.Fatal(err)
	}
	want[damagedID] = nil
	s, err := New(Deps{Catalog: cat, Ledgers: noRecovery{t}})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int32{1, 2, 3, 0} {
		got := map[catalog.LedgerID][]string{}
		var states []string
		token := ""
		for calls := 0; ; calls++ {
			if calls > 20 {
				t.Fatalf("page size %d: no end after 20 pages", size)
			}
			resp, err := s.ListUnderReplicatedLedgers(ctx, connect.NewRequest(&sluicev1.ListUnderReplicatedLedgersRequest{PageSize: size, PageToken: token}))
			if err != nil {
				t.Fatal(err)
			}
			if size > 0 && len(resp.Msg.GetLedgers()) > int(size) {
				t.Fatalf("page size %d: a page of %d", size, len(resp.Msg.GetLedgers()))
			}
			if !slices.Equal(resp.Msg.GetLiveBookies(), []string{"b1", "b2", "b3"}) {
				t.Fatalf("live bookies %v", resp.Msg.GetLiveBookies())
			}
			for _, u := range resp.Msg.GetLedgers() {
				id := catalog.LedgerID(u.GetLedgerId())
				if _, dup := got[id]; dup {
					t.Fatalf("page size %d: ledger %d listed twice", size, id)
				}
				got[id] = u.GetMissingBookies()
				states = append(states, u.GetState())
				var damaged []string
				for _, d := range u.GetDamagedCopies() {
					damaged = append(damaged, fmt.Sprintf("%s %d %s %d", d.GetBookie(), d.GetEntry(), d.GetReason(), d.GetReportedAtMs()))
				}
				if wantD := []string{"b2 0 checksum 1234"}; (id == damagedID) != (len(damaged) > 0) || (id == damagedID && !slices.Equal(damaged, wantD)) {
					t.Fatalf("page size %d: ledger %d damaged copies %v; want %v on ledger %d only", size, id, damaged, wantD, damagedID)
				}
			}
			if token = resp.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
		if len(got) != len(want) {
			t.Fatalf("page size %d: listed %v, want %v", size, got, want)
		}
		for id, missing := range want {
			if !slices.Equal(got[id], missing) {
				t.Errorf("page size %d: ledger %d missing %v, want %v", size, id, got[id], missing)
			}
		}
		if !slices.Equal(states, []string{"OPEN", "IN_RECOVERY", "CLOSED", "CLOSED", "CLOSED"}) {
			t.Errorf("page size %d: states in order %v", size, states)
		}
	}
	// ListBookies: the registry's bookies, then the missing ones, each
	// with the ledgers on bookies that name it.
	lb, err := s.ListBookies(ctx, connect.NewRequest(&sluicev1.ListBookiesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, b := range lb.Msg.GetBookies() {
		rows = append(rows, fmt.Sprintf("%s %s %d", b.GetId(), b.GetState(), b.GetLedgers()))
	}
	wantRows := []string{"b1 writable 5", "b2 writable 6", "b3 writable 5", "gone1 missing 2", "gone2 missing 2", "gone3 missing 1"}
	if !slices.Equal(rows, wantRows) || lb.Msg.GetScanned() != 7 || lb.Msg.GetLedgersTruncated() {
		t.Errorf("ListBookies: %v (scanned %d, truncated %v); want %v over 7", rows, lb.Msg.GetScanned(), lb.Msg.GetLedgersTruncated(), wantRows)
	}
	for _, bad := range []*sluicev1.ListUnderReplicatedLedgersRequest{{PageSize: -1}, {PageSize: 1001}, {PageToken: "x"}, {PageToken: "9:"}} {
		if _, err := s.ListUnderReplicatedLedgers(ctx, connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

// fakeBookies records DecommissionBookie's calls.
type fakeBookies struct{ calls []string }

func (f *fakeBookies) SetBookieDraining(_ context.Context, id string, draining bool) (client.BookieStatus, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s=%v", id, draining))
	return client.BookieStatus{ReadOnly: draining, Draining: draining, DrainingSince: time.UnixMilli(1000)}, nil
}

// DecommissionBookie reaches only bookies in the registry, says which are,
// and maps the bookie's answer; ListBookies shows a draining bookie so.
func TestDecommissionBookie(t *testing.T) {
	ctx := context.Background()
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for _, b := range []catalog.Bookie{{ID: "b1", Address: "b1:1"}, {ID: "b2", Address: "b2:1", ReadOnly: true, Draining: true},
		{ID: "b3", Address: "b3:1"}, {ID: "b4", Address: "b4:1"}, {ID: "b5", Address: "b5:1"}} {
		if _, err := cat.HeartbeatBookie(ctx, b, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	without, err := New(Deps{Catalog: cat, Ledgers: noRecovery{t}})
	if err != nil {
		t.Fatal(err)
	}
	req := func(id string, cancel bool) *connect.Request[sluicev1.DecommissionBookieRequest] {
		return connect.NewRequest(&sluicev1.DecommissionBookieRequest{BookieId: id, Cancel: cancel})
	}
	if _, err := without.DecommissionBookie(ctx, req("b1", false)); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("without Bookies: %v; want UNIMPLEMENTED", err)
	}
	fb := &fakeBookies{}
	s, err := New(Deps{Catalog: cat, Ledgers: noRecovery{t}, Bookies: fb})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.DecommissionBookie(ctx, req("b1", false))
	if err != nil || resp.Msg.GetState() != "draining" || resp.Msg.GetDrainingSinceMs() != 1000 {
		t.Fatalf("DecommissionBookie(b1) = %v, %v", resp, err)
	}
	if resp, err := s.DecommissionBookie(ctx, req("b1", true)); err != nil || resp.Msg.GetState() != "writable" || resp.Msg.GetDrainingSinceMs() != 0 {
		t.Fatalf("DecommissionBookie(b1, cancel) = %v, %v", resp, err)
	}
	if _, err := s.DecommissionBookie(ctx, req("b9", false)); connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "live: [b1 b2 b3 b4 b5]") {
		t.Fatalf("DecommissionBookie(b9) = %v; want NOT_FOUND listing the live bookies", err)
	}
	if _, err := s.DecommissionBookie(ctx, req("", false)); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("DecommissionBookie without an id = %v; want INVALID_ARGUMENT", err)
	}
	// b1 draining leaves b3, b4, b5 writable (b2 drains already): enough
	// for ensembles of 3, not for a topic of 4.
	cfg := catalog.DefaultTopicConfig()
	cfg.Replication = catalog.Replication{Ensemble: 4, WriteQuorum: 3, AckQuorum: 2}
	if _, err := cat.CreateTopic(ctx, "wide", 1, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecommissionBookie(ctx, req("b1", false)); connect.CodeOf(err) != connect.CodeFailedPrecondition ||
		!strings.Contains(err.Error(), "would leave 3 writable bookies, fewer than the largest ensemble in use (4)") {
		t.Fatalf("draining below the largest ensemble = %v; want FAILED_PRECONDITION saying so", err)
	}
	if fmt.Sprint(fb.calls) != "[b1=true b1=false]" {
		t.Fatalf("bookie calls %v", fb.calls)
	}
	list, err := s.ListBookies(ctx, connect.NewRequest(&sluicev1.ListBookiesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, b := range list.Msg.GetBookies() {
		states = append(states, b.GetId()+"="+b.GetState())
	}
	if fmt.Sprint(states) != "[b1=writable b2=draining b3=writable b4=writable b5=writable]" {
		t.Fatalf("ListBookies states %v", states)
	}
}
