package client

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// DeleteLedger refuses an unsealed ledger, then drops a sealed one from
// every bookie of its ensemble; deleting again is not an error.
func TestDeleteLedger(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	if err := c.DeleteLedger(ctxT(t), w.Metadata(), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("delete of an open ledger: %v", err)
	}
	m, err := w.Close(ctxT(t), 104)
	if err != nil {
		t.Fatal(err)
	}
	// A bookie the caller says is lost is not asked (it keeps its copy).
	kept := m.Ensembles[0].Bookies[0]
	for range 2 {
		if err := c.DeleteLedger(ctxT(t), m, func(b string) bool { return b == kept }); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := cl.rpc(t, kept).ReadEntries(ctxT(t), connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: int64(m.ID), FirstEntry: 0, LastEntry: 4})); err != nil || len(resp.Msg.GetEntries()) != 5 {
		t.Fatalf("bookie %s, skipped, lost its copy: %v, %v", kept, resp, err)
	}
	if err := c.DeleteLedger(ctxT(t), m, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range m.Ensembles[0].Bookies {
		resp, err := cl.rpc(t, id).ReadEntries(ctxT(t), connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: int64(m.ID), FirstEntry: 0, LastEntry: 4}))
		if err == nil && len(resp.Msg.GetEntries()) > 0 {
			t.Fatalf("bookie %s still has ledger %d", id, m.ID)
		}
	}
}
