package bookie

import (
	"bytes"
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// FuzzAddEntriesMessage feeds arbitrary AddEntries messages to a bookie
// the way the handler does: a message that breaks the protocol's limits is
// refused whole; otherwise every add is answered exactly once, and every
// entry the bookie stores reads back (checksum verified) as an add that was
// answered OK carried it — bad input never stores anything else.
func FuzzAddEntriesMessage(f *testing.F) {
	lac := int64(0)
	for _, m := range []*bookiev1.AddEntriesRequest{
		addMsg(1, add(1, 0, -1), add(1, 1, 0)),
		{Ledgers: []*bookiev1.LedgerAdds{
			{LedgerId: 1, MasterKey: testKey, Adds: []*bookiev1.Add{add(1, 0, -1)}, Lac: &lac},
			{LedgerId: 2, MasterKey: testKey, Adds: []*bookiev1.Add{add(2, 0, -1), add(2, 0, -1)}},
			{LedgerId: 3, MasterKey: testKey, Lac: &lac},
		}},
		addMsg(4, &bookiev1.Add{EntryId: 0, Lac: -1, Payload: []byte("x"), Crc32C: 7, Recovery: true}),
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x5a, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req bookiev1.AddEntriesRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		cfg := testConfig(vfs.NewMem())
		if err := validateAddEntries(&req, cfg.MaxInFlightAdds); err != nil {
			return // the handler ends the stream: nothing is stored
		}
		b := mustOpen(t, cfg)
		defer mustClose(t, b)
		s := service{b}
		slots := make(chan struct{}, cfg.MaxInFlightAdds)
		out := make(chan addResult, cfg.MaxInFlightAdds)
		want := 0
		for _, g := range req.GetLedgers() {
			want += len(g.GetAdds())
			if err := s.addGroup(context.Background(), g, slots, out); err != nil {
				t.Fatalf("addGroup: %v", err)
			}
		}
		type key struct{ ledger, entry int64 }
		okPayloads := map[key][][]byte{} // what adds answered OK carried
		for range want {
			r := <-out
			if r.status != bookiev1.AddStatus_ADD_STATUS_OK {
				continue
			}
			for _, g := range req.GetLedgers() {
				if g.GetLedgerId() != r.ledger {
					continue
				}
				for _, a := range g.GetAdds() {
					if a.GetEntryId() == r.entry {
						k := key{r.ledger, r.entry}
						okPayloads[k] = append(okPayloads[k], a.GetPayload())
					}
				}
			}
		}
		select {
		case r := <-out:
			t.Fatalf("answer beyond one per add: %+v", r)
		default:
		}
		for _, g := range req.GetLedgers() {
			for _, a := range g.GetAdds() {
				id, e := g.GetLedgerId(), a.GetEntryId()
				if id < 0 || e < 0 {
					continue
				}
				ents, _, err := b.Read(id, e, e, 1<<20, false, nil)
				if err != nil || len(ents) == 0 {
					continue // not stored (refused, or no such ledger)
				}
				got := ents[0]
				if wire.EntryChecksum(id, e, got.LAC, got.Payload) != got.Checksum {
					t.Fatalf("entry %d/%d served with a bad checksum", id, e)
				}
				matched := false
				for _, p := range okPayloads[key{id, e}] {
					matched = matched || bytes.Equal(p, got.Payload)
				}
				if !matched {
					t.Fatalf("entry %d/%d stored, but no add answered OK carried its payload", id, e)
				}
			}
		}
	})
}

// FuzzWatchLacMessage: any WatchLac message either ends the stream or
// leaves every watch it registers answered at most once, counted against
// the bound while registered, and gone once the stream ends.
func FuzzWatchLacMessage(f *testing.F) {
	for _, m := range []*bookiev1.WatchLacRequest{
		{Watches: []*bookiev1.LacWatch{{Id: 1, LedgerId: 1, PreviousLac: -1}, {Id: 2, LedgerId: 1, PreviousLac: 0, MaxEntryBytes: 10}}},
		{Watches: []*bookiev1.LacWatch{{Id: 1, LedgerId: 2, PreviousLac: 5}, {Id: 1, Cancel: true}, {Id: 1, LedgerId: 2, PreviousLac: -2}}},
		{Watches: []*bookiev1.LacWatch{{Id: 3, LedgerId: -1}, {Id: 4, LedgerId: 1, MaxEntryBytes: -5}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req bookiev1.WatchLacRequest
		if proto.Unmarshal(raw, &req) != nil || validateWatchLac(&req) != nil {
			return
		}
		cfg := testConfig(vfs.NewMem())
		cfg.MaxLacWaiters = 4
		b := mustOpen(t, cfg)
		defer mustClose(t, b)
		addWait(t, b, 1, 0, -1)
		addWait(t, b, 1, 1, 0)
		s := service{b}
		ls := newLacStream()
		for i, w := range req.GetWatches() {
			if err := s.watch(ls, i, w); err != nil {
				break // the stream ends
			}
		}
		seen := map[uint64]bool{}
		for _, r := range ls.take() {
			if seen[r.id] {
				t.Fatalf("watch %d answered twice", r.id)
			}
			seen[r.id] = true
			if a := s.advance(r); a.GetRefused() == "" && !a.GetFenced() && a.GetLac() <= r.prev {
				t.Fatalf("watch %d answered at LAC %d, not above %d", r.id, a.GetLac(), r.prev)
			}
		}
		if n := b.lacWaiters(); n > cfg.MaxLacWaiters || n != len(ls.regs) {
			t.Fatalf("%d watches counted, %d registered on the stream (bound %d)", n, len(ls.regs), cfg.MaxLacWaiters)
		}
		for _, r := range ls.regs {
			b.lacs.cancel(r)
		}
		if n := b.lacWaiters(); n != 0 {
			t.Fatalf("%d watches counted after the stream ended", n)
		}
	})
}
