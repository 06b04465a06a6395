package client

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// SetBookieDraining reaches the bookie through the registry and answers
// with its new mode; a writer's LeavingBookies names the bookies of its
// segments that the registry lists as draining or no longer lists.
func TestSetBookieDrainingAndLeavingBookies(t *testing.T) {
	cl := newCluster(t, 4)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 2)
	ens := w.Metadata().Ensembles[0].Bookies
	if got, err := w.LeavingBookies(ctxT(t)); err != nil || len(got) != 0 {
		t.Fatalf("LeavingBookies with every bookie writable = %v, %v", got, err)
	}
	st, err := c.SetBookieDraining(ctxT(t), ens[1], true)
	if err != nil || !st.Draining || !st.ReadOnly || st.DrainingSince.IsZero() {
		t.Fatalf("SetBookieDraining = %+v, %v", st, err)
	}
	// Its heartbeat would say so; the test registers it by hand.
	cl.mu.Lock()
	addr := cl.bookies[ens[1]].addr
	cl.mu.Unlock()
	if _, err := cl.cat.HeartbeatBookie(ctxT(t), catalog.Bookie{ID: ens[1], Address: addr, FreeBytes: 1, TotalBytes: 2, ReadOnly: true, Draining: true}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// And another leaves the registry.
	if err := cl.cat.RemoveBookie(ctxT(t), ens[2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(DefaultRegistryRefreshInterval) // the listing is read again once it is this old
	got, err := w.LeavingBookies(ctxT(t))
	slices.Sort(got)
	want := []string{ens[1], ens[2]}
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("LeavingBookies = %v, %v; want %v", got, err, want)
	}
	if st, err := c.SetBookieDraining(ctxT(t), ens[1], false); err != nil || st.Draining || st.ReadOnly {
		t.Fatalf("SetBookieDraining(false) = %+v, %v", st, err)
	}
	if _, err := c.SetBookieDraining(ctxT(t), "b99", true); err == nil {
		t.Fatal("SetBookieDraining of a bookie not in the registry succeeded")
	}
}
