package catalogtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runBookies(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"HeartbeatListExpiry": bookiesHeartbeatListExpiry,
		"Remove":              bookiesRemove,
		"Validation":          bookiesValidation,
	})
}

func bookie(id string, free int64, ro bool) catalog.Bookie {
	return catalog.Bookie{ID: id, Address: id + ".bookies.local:3181", FreeBytes: free, TotalBytes: 1 << 40, ReadOnly: ro}
}

func bookiesHeartbeatListExpiry(e *env) {
	for _, b := range []catalog.Bookie{bookie("bookie-2", 100, false), bookie("bookie-1", 200, true)} {
		got, err := e.b.HeartbeatBookie(e.ctx, b, 6*time.Second)
		b.ExpiresAt = Start.Add(6 * time.Second)
		if err != nil || !bookieEqual(got, b) {
			e.t.Fatalf("HeartbeatBookie = %+v, %v; want %+v", got, err, b)
		}
	}
	e.clk.Advance(3 * time.Second)
	update := bookie("bookie-2", 50, true)
	update.Draining = true
	if _, err := e.b.HeartbeatBookie(e.ctx, update, 6*time.Second); err != nil {
		e.t.Fatal(err)
	}
	live := wantBookies(e, "bookie-1", "bookie-2")
	update.ExpiresAt = Start.Add(9 * time.Second)
	if !bookieEqual(live[1], update) {
		e.t.Fatalf("bookie-2 after an update = %+v, want %+v", live[1], update)
	}
	e.clk.Advance(3 * time.Second)
	wantBookies(e, "bookie-2")
	e.clk.Advance(3 * time.Second)
	wantBookies(e)
}

func bookiesRemove(e *env) {
	for _, id := range []string{"bookie-1", "bookie-2"} {
		if _, err := e.b.HeartbeatBookie(e.ctx, bookie(id, 1, false), time.Minute); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.b.RemoveBookie(e.ctx, "bookie-1"); err != nil {
		e.t.Fatalf("RemoveBookie: %v", err)
	}
	wantBookies(e, "bookie-2")
	wantErr(e.t, e.b.RemoveBookie(e.ctx, "bookie-1"), catalog.ErrNotFound, "RemoveBookie twice")
}

func bookiesValidation(e *env) {
	ok := bookie("bookie-1", 1, false)
	mod := func(f func(b *catalog.Bookie)) catalog.Bookie { b := ok; f(&b); return b }
	cases := []struct {
		b     catalog.Bookie
		ttl   time.Duration
		field string
	}{
		{mod(func(b *catalog.Bookie) { b.ID = "" }), time.Second, "id"},
		{mod(func(b *catalog.Bookie) { b.Address = "" }), time.Second, "address"},
		{mod(func(b *catalog.Bookie) { b.TotalBytes = -1 }), time.Second, "totalBytes"},
		{mod(func(b *catalog.Bookie) { b.FreeBytes = b.TotalBytes + 1 }), time.Second, "freeBytes"},
		{mod(func(b *catalog.Bookie) { b.FreeBytes = -1 }), time.Second, "freeBytes"},
		{mod(func(b *catalog.Bookie) { b.Draining, b.ReadOnly = true, false }), time.Second, "draining"},
		{ok, time.Hour, "ttl"},
	}
	for _, c := range cases {
		_, err := e.b.HeartbeatBookie(e.ctx, c.b, c.ttl)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("HeartbeatBookie(%+v, %v)", c.b, c.ttl))
	}
	wantBookies(e)
}

func wantBookies(e *env, ids ...string) []catalog.Bookie {
	e.t.Helper()
	live, err := e.b.ListLiveBookies(e.ctx)
	if err != nil {
		e.t.Fatalf("ListLiveBookies: %v", err)
	}
	var got []string
	for _, b := range live {
		got = append(got, b.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		e.t.Fatalf("ListLiveBookies = %v, want %v", got, ids)
	}
	return live
}

func bookieEqual(a, b catalog.Bookie) bool {
	return a.ID == b.ID && a.Address == b.Address && a.FreeBytes == b.FreeBytes && a.TotalBytes == b.TotalBytes &&
		a.ReadOnly == b.ReadOnly && a.Draining == b.Draining && a.ExpiresAt.Equal(b.ExpiresAt)
}
