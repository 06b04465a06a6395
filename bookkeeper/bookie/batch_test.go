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
				msg.Adds = append(msg.Adds, add(ledger, e, e-1))
				next[ledger]++
			}
			total += len(msg.Adds)
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
		msg.Adds = append(msg.Adds, add(7, e, -1))
	}
	msg.Adds[3].Crc32C++                                    // bad checksum
	msg.Adds[5].Payload = make([]byte, cfg.MaxEntryBytes+1) // too large (the message is within its limit)
	msg.Adds[5].Crc32C = storage.EntryChecksum(7, 5, -1, msg.Adds[5].Payload)
	msg.Adds[8].Lac = -5 // invalid
	wantStatus := map[int64]bookiev1.AddStatus{
		3: bookiev1.AddStatus_ADD_STATUS_BAD_CHECKSUM,
		5: bookiev1.AddStatus_ADD_STATUS_ERROR,
		8: bookiev1.AddStatus_ADD_STATUS_ERROR,
	}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	results, _ := receiveResults(t, stream, len(msg.Adds))
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
	noKey.MasterKey = nil
	otherKey := addMsg(7, add(7, 10, -1), add(7, 11, -1))
	otherKey.MasterKey = []byte("another writer")
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
			if want := (result{tc.msg.GetLedgerId(), tc.msg.GetAdds()[i].GetEntryId(), tc.want}); r != want {
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
		tooMany.Adds = append(tooMany.Adds, add(1, e, -1))
	}
	tooLarge := addMsg(1)
	for e := range int64(3) {
		p := make([]byte, 60<<10)
		tooLarge.Adds = append(tooLarge.Adds, &bookiev1.Add{EntryId: e, Lac: -1, Payload: p, Crc32C: storage.EntryChecksum(1, e, -1, p)})
	}
	for name, tc := range map[string]struct {
		msg  *bookiev1.AddEntriesRequest
		code connect.Code
		text string
	}{
		"no adds":           {addMsg(1), connect.CodeInvalidArgument, "carries no adds"},
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

// sendResults sends one response per run of one ledger's results, in
// order.
func TestSendResultsSplitsByLedger(t *testing.T) {
	ok, fenced := bookiev1.AddStatus_ADD_STATUS_OK, bookiev1.AddStatus_ADD_STATUS_FENCED
	ready := []addResult{{1, 0, ok}, {1, 1, ok}, {2, 5, fenced}, {1, 2, ok}, {1, 3, ok}, {1, 4, ok}}
	var got [][]result
	err := sendResults(func(r *bookiev1.AddEntriesResponse) error {
		var rs []result
		for _, x := range r.GetResults() {
			rs = append(rs, result{r.GetLedgerId(), x.GetEntryId(), x.GetStatus()})
		}
		got = append(got, rs)
		return nil
	}, ready)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]result{{{1, 0, ok}, {1, 1, ok}}, {{2, 5, fenced}}, {{1, 2, ok}, {1, 3, ok}, {1, 4, ok}}}
	if len(got) != len(want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("response %d = %v; want %v", i, got[i], want[i])
		}
	}
	boom := errors.New("stream broke")
	calls := 0
	if err := sendResults(func(*bookiev1.AddEntriesResponse) error { calls++; return boom }, ready); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("send failure: %v after %d calls; want the error after 1", err, calls)
	}
}
