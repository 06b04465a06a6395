package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/auth"
)

// A request counts against its principal when it has one, whatever client
// id header it sends; against the header without one; and a forwarded
// request is not charged again.
func TestQuotaKey(t *testing.T) {
	alice := auth.WithPrincipal(context.Background(), auth.Principal{Kind: auth.User, Name: "alice", Via: "jwt"})
	for _, c := range []struct {
		ctx       context.Context
		header    string
		forwarded bool
		want      string
	}{
		{alice, "someone-else", false, "User:alice"},
		{alice, "", false, "User:alice"},
		{context.Background(), "app-1", false, "app-1"},
		{alice, "app-1", true, forwardedKey},
	} {
		if got, err := quotaKey(c.ctx, c.header, c.forwarded); err != nil || got != c.want {
			t.Errorf("quotaKey(%q, forwarded %v) = %q, %v; want %q", c.header, c.forwarded, got, err, c.want)
		}
	}
	if _, err := quotaKey(alice, strings.Repeat("x", MaxClientIDLength+1), false); err == nil {
		t.Error("an over-long client id header was taken")
	}
}
