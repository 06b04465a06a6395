package admin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Ledgers still on bookies that name a bookie missing from the registry
// are listed (and ListBookies counts each bookie's ledgers, missing ones
// included) — OPEN, IN_RECOVERY and CLOSED, in state then id order, with
// the missing bookies — page by page with no ledger lost or repeated at
// any page size; OFFLOADED ledgers and ledgers on live bookies are not.
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
		if !slices.Equal(states, []string{"OPEN", "IN_RECOVERY", "CLOSED", "CLOSED"}) {
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
	wantRows := []string{"b1 writable 4", "b2 writable 5", "b3 writable 4", "gone1 missing 2", "gone2 missing 2", "gone3 missing 1"}
	if !slices.Equal(rows, wantRows) || lb.Msg.GetScanned() != 6 || lb.Msg.GetLedgersTruncated() {
		t.Errorf("ListBookies: %v (scanned %d, truncated %v); want %v over 6", rows, lb.Msg.GetScanned(), lb.Msg.GetLedgersTruncated(), wantRows)
	}
	for _, bad := range []*sluicev1.ListUnderReplicatedLedgersRequest{{PageSize: -1}, {PageSize: 1001}, {PageToken: "x"}, {PageToken: "9:"}} {
		if _, err := s.ListUnderReplicatedLedgers(ctx, connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}
