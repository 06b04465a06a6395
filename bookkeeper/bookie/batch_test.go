package bookie

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/storage"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Adds of several ledgers, many per message, interleaved on one stream:
// every add is acknowledged once, each ledger's acknowledgements in entry
// order, every response holding results of its own ledger only.
func TestServiceBatchAcksInOrder(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	stream := c.AddEntries(context.Background())
	defer func() { _ = stream.CloseResponse() }()

	next := map[int64]int64{1: 0, 2: 0}
	var total int
	sent := make(chan error, 1)
	var msgs []*bookiev1.AddEntriesRequest
	for round := range 6 {
		for _, ledger := range []int64{1, 2} {
			msg := addMsg(ledger)
			for range 10 + 9*round + int(ledger) { // 11..57 adds
				e := next[ledger]
				msg.Ledgers[0].Adds = append(msg.Ledgers[0].Adds, add(ledger, e, e-1))
				next[ledger]++
			}
			total += len(msg.Ledgers[0].Adds)
			msgs = append(msgs, msg)
		}
	}
	go func() {
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseRequest()
	}()
	results, responses := receiveResults(t, stream, total)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{}
	for _, r := range results {
		if r.status != bookiev1.AddStatus_ADD_STATUS_OK || r.entry != want[r.ledger] {
			t.Fatalf("result %+v; want entry %d of ledger %d OK", r, want[r.ledger], r.ledger)
		}
		want[r.ledger]++
	}
	if want[1] != next[1] || want[2] != next[2] {
		t.Fatalf("acknowledged %v; want %v", want, next)
	}
	t.Logf("%d results in %d responses", total, responses)
	if _, err := stream.Receive(); err == nil {
		t.Fatal("stream did not end after the last answer")
	}
}

// A bad add in the middle of a message fails alone, with its own status;
// the adds before and after it are stored and acknowledged.
func TestServiceBatchBadAddFailsAlone(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	c := serve(t, b)
	stream := c.AddEntries(context.Background())
	defer func() { _ = stream.CloseResponse() }()

	msg := addMsg(7)
	for e := range int64(10) {
		msg.Ledgers[0].Adds = append(msg.Ledgers[0].Adds, add(7, e, -1))
	}
	msg.Ledgers[0].Adds[3].Crc32C++                                    // bad checksum
	msg.Ledgers[0].Adds[5].Payload = make([]byte, cfg.MaxEntryBytes+1) // too large (the message is within its limit)
	msg.Ledgers[0].Adds[5].Crc32C = wire.EntryChecksum(7, 5, -1, msg.Ledgers[0].Adds[5].Payload)
	msg.Ledgers[0].Adds[8].Lac = -5 // invalid
	wantStatus := map[int64]bookiev1.AddStatus{
		3: bookiev1.AddStatus_ADD_STATUS_BAD_CHECKSUM,
		5: bookiev1.AddStatus_ADD_STATUS_ERROR,
		8: bookiev1.AddStatus_ADD_STATUS_ERROR,
	}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	results, _ := receiveResults(t, stream, len(msg.Ledgers[0].Adds))
	var acked []int64
	seen := map[int64]bool{}
	for _, r := range results {
		want, bad := wantStatus[r.entry]
		if !bad {
			want = bookiev1.AddStatus_ADD_STATUS_OK
			acked = append(acked, r.entry)
		}
		if r.ledger != 7 || r.status != want || seen[r.entry] {
			t.Errorf("result %+v; want %v once", r, want)
		}
		seen[r.entry] = true
	}
	// Refusals may overtake earlier adds still being fsynced; the
	// acknowledgements stay in order.
	if !slices.Equal(acked, []int64{0, 1, 2, 4, 6, 7, 9}) {
		t.Errorf("acknowledged %v in this order; want 0 1 2 4 6 7 9", acked)
	}
	for e := range int64(10) {
		_, _, err := b.Read(7, e, e, 0, false, nil)
		if _, bad := wantStatus[e]; bad != errors.Is(err, storage.ErrNoSuchEntry) {
			t.Errorf("read of entry %d: %v", e, err)
		}
	}

	// A message whose shared fields are bad fails each of its adds; the
	// stream carries on.
	noKey := addMsg(8, add(8, 0, -1), add(8, 1, -1))
	noKey.Ledgers[0].MasterKey = nil
	otherKey := addMsg(7, add(7, 10, -1), add(7, 11, -1))
	otherKey.Ledgers[0].MasterKey = []byte("another writer")
	for _, tc := range []struct {
		msg  *bookiev1.AddEntriesRequest
		want bookiev1.AddStatus
	}{
		{noKey, bookiev1.AddStatus_ADD_STATUS_ERROR},
		{otherKey, bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED},
		{addMsg(7, add(7, 10, 9), add(7, 11, 9)), bookiev1.AddStatus_ADD_STATUS_OK},
	} {
		if err := stream.Send(tc.msg); err != nil {
			t.Fatal(err)
		}
		got, _ := receiveResults(t, stream, 2)
		for i, r := range got {
			if want := (result{tc.msg.GetLedgers()[0].GetLedgerId(), tc.msg.GetLedgers()[0].GetAdds()[i].GetEntryId(), tc.want}); r != want {
				t.Errorf("got %+v; want %+v", r, want)
			}
		}
	}
	_ = stream.CloseRequest()
}

// A message that breaks the protocol's limits ends the stream with an
// error naming the limit.
func TestServiceAddMessageLimits(t *testing.T) {
	cfg := testConfig(vfs.NewMem()) // 64 adds in flight; entries ≤ 64 KiB; messages ≤ 128 KiB
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	c := serve(t, b)

	tooMany := addMsg(1)
	for e := range int64(cfg.MaxInFlightAdds + 1) {
		tooMany.Ledgers[0].Adds = append(tooMany.Ledgers[0].Adds, add(1, e, -1))
	}
	tooLarge := addMsg(1)
	for e := range int64(3) {
		p := make([]byte, 60<<10)
		tooLarge.Ledgers[0].Adds = append(tooLarge.Ledgers[0].Adds, &bookiev1.Add{EntryId: e, Lac: -1, Payload: p, Crc32C: wire.EntryChecksum(1, e, -1, p)})
	}
	for name, tc := range map[string]struct {
		msg  *bookiev1.AddEntriesRequest
		code connect.Code
		text string
	}{
		"no groups":         {&bookiev1.AddEntriesRequest{}, connect.CodeInvalidArgument, "carries no ledgers"},
		"empty group":       {addMsg(1), connect.CodeInvalidArgument, "carries neither adds nor a lac"},
		"too many adds":     {tooMany, connect.CodeInvalidArgument, "carries 65 adds; limit 64"},
		"message too large": {tooLarge, connect.CodeResourceExhausted, "larger than configured max"},
	} {
		t.Run(name, func(t *testing.T) {
			stream := c.AddEntries(context.Background())
			defer func() { _ = stream.CloseResponse() }()
			// A good message first: it is answered.
			if err := stream.Send(addReq(9, 0, -1)); err != nil {
				t.Fatal(err)
			}
			if got, _ := receiveResults(t, stream, 1); got[0].status != bookiev1.AddStatus_ADD_STATUS_OK {
				t.Fatalf("good add: %+v", got[0])
			}
			_ = stream.Send(tc.msg) // may fail once the server ended the stream
			_, err := stream.Receive()
			if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("after the message: %v; want %v naming %q", err, tc.code, tc.text)
			}
		})
	}
	// Each good add above went to ledger 9 entry 0 again: harmless.
}

// sendResults sends every ready answer in one response, one group per run
// of one ledger's results, in order.
func TestSendResultsGroupsByLedger(t *testing.T) {
	ok, fenced := bookiev1.AddStatus_ADD_STATUS_OK, bookiev1.AddStatus_ADD_STATUS_FENCED
	ready := []addResult{{1, 0, ok}, {1, 1, ok}, {2, 5, fenced}, {1, 2, ok}, {1, 3, ok}, {1, 4, ok}}
	var got [][]result
	calls := 0
	err := sendResults(func(r *bookiev1.AddEntriesResponse) error {
		calls++
		for _, g := range r.GetLedgers() {
			var rs []result
			for _, x := range g.GetResults() {
				rs = append(rs, result{g.GetLedgerId(), x.GetEntryId(), x.GetStatus()})
			}
			got = append(got, rs)
		}
		return nil
	}, ready)
	if err != nil || calls != 1 {
		t.Fatalf("%d responses, err %v; want 1", calls, err)
	}
	want := [][]result{{{1, 0, ok}, {1, 1, ok}}, {{2, 5, fenced}}, {{1, 2, ok}, {1, 3, ok}, {1, 4, ok}}}
	if len(got) != len(want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("group %d = %v; want %v", i, got[i], want[i])
		}
	}
	boom := errors.New("stream broke")
	if err := sendResults(func(*bookiev1.AddEntriesResponse) error { return boom }, ready); !errors.Is(err, boom) {
		t.Fatalf("send failure: %v; want the error", err)
	}
}

// One message carries adds of several ledgers and LAC-only groups: every
// add is answered under its own ledger, and each LAC reaches the ledger's
// long-polls as WriteLac would, with no answer of its own.
func TestServiceMessageOfSeveralLedgers(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()
	stream := c.AddEntries(ctx)
	defer func() { _ = stream.CloseResponse() }()

	lac := func(v int64) *int64 { return &v }
	msg := &bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{
		{LedgerId: 1, MasterKey: testKey, Adds: []*bookiev1.Add{add(1, 0, -1), add(1, 1, 0)}},
		{LedgerId: 2, MasterKey: testKey, Adds: []*bookiev1.Add{add(2, 0, -1)}, Lac: lac(0)},
		{LedgerId: 3, MasterKey: []byte("another key"), Adds: []*bookiev1.Add{add(3, 0, -1)}},
	}}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	got, _ := receiveResults(t, stream, 4)
	ok := bookiev1.AddStatus_ADD_STATUS_OK
	want := map[result]bool{{1, 0, ok}: true, {1, 1, ok}: true, {2, 0, ok}: true, {3, 0, ok}: true}
	for _, r := range got {
		if !want[r] {
			t.Errorf("unexpected result %+v", r)
		}
		delete(want, r)
	}
	if len(want) > 0 {
		t.Errorf("missing results %v", want)
	}
	// Ledger 2's LAC came with its add; ledger 1 gets one alone.
	if err := stream.Send(&bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{{LedgerId: 1, MasterKey: testKey, Lac: lac(1)}}}); err != nil {
		t.Fatal(err)
	}
	for ledger, want := range map[int64]int64{1: 1, 2: 0} {
		resp, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: ledger, PreviousLac: want - 1, TimeoutMs: 5000}))
		if err != nil || resp.Msg.GetLac() != want {
			t.Fatalf("ledger %d: lac %d, %v; want %d", ledger, resp.Msg.GetLac(), err, want)
		}
	}
	// A LAC-only group with another writer's key changes nothing and ends
	// nothing: the next add is answered.
	if err := stream.Send(&bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{{LedgerId: 1, MasterKey: []byte("x"), Lac: lac(5)}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(addReq(1, 2, 1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := receiveResults(t, stream, 1); got[0] != (result{1, 2, ok}) {
		t.Fatalf("after a refused lac: %+v", got[0])
	}
	resp, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 1, PreviousLac: -1}))
	if err != nil || resp.Msg.GetLac() != 1 {
		t.Fatalf("ledger 1 lac %d, %v; want 1 (the refused push ignored)", resp.Msg.GetLac(), err)
	}
	_ = stream.CloseRequest()
}
