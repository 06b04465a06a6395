package bookie

import (
	"bytes"
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/bookkeeper/storage"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
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
				if storage.EntryChecksum(id, e, got.LAC, got.Payload) != got.Checksum {
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
