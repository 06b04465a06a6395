package catalogtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runOwners(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"HeartbeatAndExpiry": ownersHeartbeatAndExpiry,
		"Remove":             ownersRemove,
		"Validation":         ownersValidation,
	})
}

func ownersHeartbeatAndExpiry(e *env) {
	a := e.heartbeat("ingest-a", 10*time.Second)
	if a.ID != "ingest-a" || a.Address != "ingest-a.ingest.local:7420" || !a.ExpiresAt.Equal(Start.Add(10*time.Second)) {
		e.t.Fatalf("HeartbeatOwner = %+v, want expiry %v", a, Start.Add(10*time.Second))
	}
	e.heartbeat("ingest-b", 20*time.Second)
	wantOwners(e, "ingest-a", "ingest-b")

	// Expiry is exclusive: at ExpiresAt the record is no longer live.
	e.clk.Advance(10 * time.Second)
	wantOwners(e, "ingest-b")
	got, err := e.b.GetOwner(e.ctx, "ingest-a")
	if err != nil || !got.ExpiresAt.Equal(a.ExpiresAt) || got.LiveAt(e.clk.Now()) {
		e.t.Fatalf("GetOwner of an expired owner = %+v, %v; want the expired record", got, err)
	}

	// A renewal counts from the store's now, and may change the address.
	renewed, err := e.b.HeartbeatOwner(e.ctx, "ingest-a", "10.0.0.7:7420", 5*time.Second)
	if err != nil || renewed.Address != "10.0.0.7:7420" || !renewed.ExpiresAt.Equal(Start.Add(15*time.Second)) {
		e.t.Fatalf("renewal = %+v, %v; want new address, expiry %v", renewed, err, Start.Add(15*time.Second))
	}
	wantOwners(e, "ingest-a", "ingest-b")
	_, err = e.b.GetOwner(e.ctx, "ingest-z")
	wantErr(e.t, err, catalog.ErrNotFound, "GetOwner of an unknown owner")
}

func ownersRemove(e *env) {
	e.heartbeat("ingest-a", time.Minute)
	e.heartbeat("ingest-b", time.Minute)
	if err := e.b.RemoveOwner(e.ctx, "ingest-b"); err != nil {
		e.t.Fatalf("RemoveOwner: %v", err)
	}
	wantOwners(e, "ingest-a")
	_, err := e.b.GetOwner(e.ctx, "ingest-b")
	wantErr(e.t, err, catalog.ErrNotFound, "GetOwner after RemoveOwner")
	wantErr(e.t, e.b.RemoveOwner(e.ctx, "ingest-b"), catalog.ErrNotFound, "RemoveOwner twice")
}

func ownersValidation(e *env) {
	cases := []struct {
		id, addr string
		ttl      time.Duration
		field    string
	}{
		{"", "a:1", time.Second, "id"},
		{"has space", "a:1", time.Second, "id"},
		{"a/b", "a:1", time.Second, "id"},
		{strings.Repeat("x", catalog.MaxIDLength+1), "a:1", time.Second, "id"},
		{"ok", "", time.Second, "address"},
		{"ok", "a b:1", time.Second, "address"},
		{"ok", "a:1", 0, "ttl"},
		{"ok", "a:1", catalog.MinHeartbeatTTL - 1, "ttl"},
		{"ok", "a:1", catalog.MaxHeartbeatTTL + 1, "ttl"},
	}
	for _, c := range cases {
		_, err := e.b.HeartbeatOwner(e.ctx, c.id, c.addr, c.ttl)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("HeartbeatOwner(%.20q, %q, %v)", c.id, c.addr, c.ttl))
	}
	wantOwners(e)
}

func wantOwners(e *env, ids ...string) {
	e.t.Helper()
	live, err := e.b.ListLiveOwners(e.ctx)
	if err != nil {
		e.t.Fatalf("ListLiveOwners: %v", err)
	}
	var got []string
	for _, o := range live {
		got = append(got, o.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		e.t.Fatalf("ListLiveOwners = %v, want %v", got, ids)
	}
}
