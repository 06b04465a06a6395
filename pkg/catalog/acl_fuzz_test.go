package catalog_test

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// FuzzACL: an ACL that validates has a key that parses back to it; a
// filter that validates selects the ACLs equal on its set fields; a key
// that parses validates.
func FuzzACL(f *testing.F) {
	f.Add("User:alice", "topic", "prefix", "orders.", "produce", "allow", "orders.eu")
	f.Add("User:*", "cluster", "literal", "cluster", "all", "deny", "cluster")
	f.Add("Service:x", "subject", "literal", "*", "describe", "allow", "a\x1fb")
	f.Fuzz(func(t *testing.T, principal, rtype, ptype, name, op, perm, probe string) {
		a := catalog.ACL{Principal: principal, ResourceType: catalog.ResourceType(rtype), PatternType: catalog.PatternType(ptype),
			ResourceName: name, Operation: catalog.Operation(op), Permission: catalog.Permission(perm)}
		if catalog.ValidateACL(a) == nil {
			back, err := catalog.ParseACLKey(catalog.ACLKey(a))
			if err != nil || back != a {
				t.Fatalf("ACLKey(%+v) parses back as %+v, %v", a, back, err)
			}
			if catalog.ValidateACLFilter(catalog.ACLFilter(a)) != nil || !catalog.ACLFilter(a).Selects(a) {
				t.Fatalf("the ACL as a filter does not select it: %+v", a)
			}
			m := a.Matches(a.ResourceType, probe)
			switch {
			case a.PatternType == catalog.PatternPrefix && m != strings.HasPrefix(probe, name):
				t.Fatalf("prefix %q matches %q: %v", name, probe, m)
			case a.PatternType == catalog.PatternLiteral && m != (name == "*" || name == probe):
				t.Fatalf("literal %q matches %q: %v", name, probe, m)
			}
		}
		if b, err := catalog.ParseACLKey(principal + "\x1f" + rtype + "\x1f" + ptype + "\x1f" + name + "\x1f" + op + "\x1f" + perm); err == nil {
			if catalog.ValidateACL(b) != nil {
				t.Fatalf("a key that parses holds an invalid ACL %+v", b)
			}
		}
	})
}
