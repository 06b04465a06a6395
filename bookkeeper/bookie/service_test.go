package bookie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/storage"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// The add stream answers every add, in order within a ledger, with the
// status the protocol promises, whether the adds come one per message or
// many; reads return what was acknowledged.
func TestServiceAddsAndReads(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()

	stream := c.AddEntries(ctx)
	// 200 adds, more than MaxInFlightAdds (64): the server pushes back,
	// counting adds, not messages. Message sizes up to the limit.
	sizes := []int{1, 1, 7, 64, 2, 64, 61}
	const n = 200
	sent := make(chan error, 1)
	go func() {
		e := int64(0)
		for _, size := range sizes {
			msg := addMsg(1)
			for range size {
				msg.Ledgers[0].Adds = append(msg.Ledgers[0].Adds, add(1, e, e-1))
				e++
			}
			if err := stream.Send(msg); err != nil {
				sent <- err
				return
			}
		}
		if e != n {
			sent <- fmt.Errorf("sent %d adds, want %d", e, n)
			return
		}
		sent <- stream.CloseRequest()
	}()
	results, responses := receiveResults(t, stream, n)
	for i, r := range results {
		if r != (result{1, int64(i), bookiev1.AddStatus_ADD_STATUS_OK}) {
			t.Fatalf("answer %d = %+v", i, r)
		}
	}
	t.Logf("%d results in %d responses", n, responses)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Receive(); err == nil {
		t.Fatal("stream did not end after the last answer")
	}
	if err := stream.CloseResponse(); err != nil {
		t.Fatal(err)
	}

	resp, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 1, FirstEntry: 10, LastEntry: 19}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.GetEntries()) != 10 || resp.Msg.GetLac() != n-2 || resp.Msg.GetFenced() {
		t.Fatalf("read: %d entries, lac %d, fenced %v", len(resp.Msg.GetEntries()), resp.Msg.GetLac(), resp.Msg.GetFenced())
	}
	for i, e := range resp.Msg.GetEntries() {
		id := int64(10 + i)
		if e.GetEntryId() != id || !bytes.Equal(e.GetPayload(), payload(1, id)) ||
			e.GetCrc32C() != wire.EntryChecksum(1, id, e.GetLac(), e.GetPayload()) {
			t.Fatalf("entry %d = %v", id, e)
		}
	}
	lac, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 1, PreviousLac: -1}))
	if err != nil || lac.Msg.GetLac() != n-2 || len(lac.Msg.GetEntries()) != 0 {
		t.Fatalf("ReadLac = %v, %v", lac, err)
	}
	// Asked for, the entries the LAC made readable come along: from
	// previous+1, up to the LAC, within the byte bound (at least one).
	for _, tc := range []struct {
		prev     int64
		maxBytes int32
		want     int
	}{
		{n - 5, 1 << 20, 3},
		{n - 2, 1 << 20, 0}, // nothing above previous: the long-poll timed out
		{n - 40, int32(len(payload(1, n-39)) * 5), 5},
		{n - 40, 1, 1},
	} {
		lac, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 1, PreviousLac: tc.prev, MaxEntryBytes: tc.maxBytes, TimeoutMs: 10}))
		if err != nil || lac.Msg.GetLac() != n-2 || len(lac.Msg.GetEntries()) != tc.want {
			t.Fatalf("ReadLac after %d within %d bytes: %d entries, lac %d, %v; want %d", tc.prev, tc.maxBytes, len(lac.Msg.GetEntries()), lac.Msg.GetLac(), err, tc.want)
		}
		for i, e := range lac.Msg.GetEntries() {
			id := tc.prev + 1 + int64(i)
			if e.GetEntryId() != id || !bytes.Equal(e.GetPayload(), payload(1, id)) || e.GetCrc32C() != wire.EntryChecksum(1, id, e.GetLac(), e.GetPayload()) {
				t.Fatalf("ReadLac entry %d = %v", id, e)
			}
		}
	}
	if _, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 1, PreviousLac: -1, MaxEntryBytes: -1})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("negative max_entry_bytes: %v; want INVALID_ARGUMENT", err)
	}
}

// Each refusal gets its own status; the stream carries on after it.
func TestServiceAddStatuses(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()
	if _, err := c.Fence(ctx, connect.NewRequest(&bookiev1.FenceRequest{LedgerId: 2, MasterKey: testKey})); err != nil {
		t.Fatal(err)
	}
	badSum := addReq(1, 1, 0)
	badSum.Ledgers[0].Adds[0].Crc32C++
	otherKey := addReq(1, 2, 0)
	otherKey.Ledgers[0].MasterKey = []byte("another writer")
	noKey := addReq(1, 3, 0)
	noKey.Ledgers[0].MasterKey = nil
	recovery := addReq(2, 0, -1)
	recovery.Ledgers[0].Adds[0].Recovery = true
	cases := []struct {
		req  *bookiev1.AddEntriesRequest
		want bookiev1.AddStatus
	}{
		{addReq(1, 0, -1), bookiev1.AddStatus_ADD_STATUS_OK},
		{badSum, bookiev1.AddStatus_ADD_STATUS_BAD_CHECKSUM},
		{otherKey, bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED},
		{noKey, bookiev1.AddStatus_ADD_STATUS_ERROR},
		{addReq(2, 0, -1), bookiev1.AddStatus_ADD_STATUS_FENCED},
		{recovery, bookiev1.AddStatus_ADD_STATUS_OK},
	}
	stream := c.AddEntries(ctx)
	for _, tc := range cases {
		if err := stream.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		got, _ := receiveResults(t, stream, 1)
		if want := (result{tc.req.GetLedgers()[0].GetLedgerId(), tc.req.GetLedgers()[0].GetAdds()[0].GetEntryId(), tc.want}); got[0] != want {
			t.Errorf("got %+v; want %+v", got[0], want)
		}
	}
	b.SetReadOnly(true)
	if err := stream.Send(addReq(1, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := receiveResults(t, stream, 1); got[0].status != bookiev1.AddStatus_ADD_STATUS_REJECTED {
		t.Errorf("add when read-only: %+v; want REJECTED", got[0])
	}
	st, err := c.GetStatus(ctx, connect.NewRequest(&bookiev1.GetStatusRequest{}))
	if err != nil || !st.Msg.GetReadOnly() || st.Msg.GetBookieId() != "bookie-1" || st.Msg.GetInstanceId() != "test" {
		t.Errorf("GetStatus = %v, %v", st, err)
	}
	if err := stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseResponse(); err != nil {
		t.Fatal(err)
	}
}

// Recovery reads fence before reading (BookKeeper PR #2616): "no such
// entry" from a fenced read means no normal add of it will be accepted.
func TestServiceFencingReadAndErrors(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()
	addWait(t, b, 4, 0, -1)

	_, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 4, FirstEntry: 1, LastEntry: 1, FenceAndRead: true, MasterKey: testKey}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("fenced read of a missing entry: %v; want NotFound", err)
	}
	if err := b.Add(ctx, AddRequest{Ledger: 4, Entry: 1, LAC: 0, Payload: payload(4, 1), MasterKey: testKey,
		Checksum: wire.EntryChecksum(4, 1, 0, payload(4, 1))}, func(error) {}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add after the fenced read: %v; want ErrFenced", err)
	}
	fence, err := c.Fence(ctx, connect.NewRequest(&bookiev1.FenceRequest{LedgerId: 4, MasterKey: testKey}))
	if err != nil || fence.Msg.GetLastEntry() != 0 {
		t.Fatalf("Fence = %v, %v; want last entry 0", fence, err)
	}

	for name, tc := range map[string]struct {
		call func() error
		want connect.Code
	}{
		"fence_and_read without key": {func() error {
			_, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 4, FirstEntry: 0, LastEntry: 0, FenceAndRead: true}))
			return err
		}, connect.CodeInvalidArgument},
		"reversed range": {func() error {
			_, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 4, FirstEntry: 3, LastEntry: 1}))
			return err
		}, connect.CodeInvalidArgument},
		"max_bytes too large": {func() error {
			_, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 4, LastEntry: 1, MaxBytes: 1 << 30}))
			return err
		}, connect.CodeInvalidArgument},
		"unknown ledger": {func() error {
			_, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 77, LastEntry: 1}))
			return err
		}, connect.CodeNotFound},
		"write lac with wrong key": {func() error {
			_, err := c.WriteLac(ctx, connect.NewRequest(&bookiev1.WriteLacRequest{LedgerId: 4, MasterKey: []byte("x"), Lac: 0}))
			return err
		}, connect.CodeFailedPrecondition},
		"lac wait too long": {func() error {
			_, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 4, TimeoutMs: 1 << 30}))
			return err
		}, connect.CodeInvalidArgument},
		"missing ledgers: too many ids": {func() error {
			_, err := c.MissingLedgers(ctx, connect.NewRequest(&bookiev1.MissingLedgersRequest{LedgerIds: make([]int64, MaxMissingLedgersIDs+1)}))
			return err
		}, connect.CodeInvalidArgument},
		"missing ledgers: negative id": {func() error {
			_, err := c.MissingLedgers(ctx, connect.NewRequest(&bookiev1.MissingLedgersRequest{LedgerIds: []int64{4, -1}}))
			return err
		}, connect.CodeInvalidArgument},
	} {
		if got := connect.CodeOf(tc.call()); got != tc.want {
			t.Errorf("%s: code %v; want %v", name, got, tc.want)
		}
	}

	missing := func() []int64 {
		t.Helper()
		resp, err := c.MissingLedgers(ctx, connect.NewRequest(&bookiev1.MissingLedgersRequest{LedgerIds: []int64{77, 4, 78}}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetMissing()
	}
	if got := missing(); !slices.Equal(got, []int64{77, 78}) {
		t.Fatalf("MissingLedgers(77, 4, 78) = %v; want [77 78] (it holds ledger 4)", got)
	}
	if _, err := c.DeleteLedger(ctx, connect.NewRequest(&bookiev1.DeleteLedgerRequest{LedgerId: 4})); err != nil {
		t.Fatal(err)
	}
	if got := missing(); !slices.Equal(got, []int64{77, 4, 78}) {
		t.Fatalf("MissingLedgers after deleting ledger 4 = %v; want all three", got)
	}
	_, err = c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 4, LastEntry: 0}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("read of a deleted ledger: %v; want NotFound", err)
	}
}
