package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runACLs(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"CreateListDelete": aclCreateListDelete,
		"Idempotent":       aclIdempotent,
		"Filters":          aclFilters,
		"ManyAndOdd":       aclManyAndOdd,
		"Concurrent":       aclConcurrent,
	})
}

func acl(principal string, rt catalog.ResourceType, pt catalog.PatternType, name string, op catalog.Operation, perm catalog.Permission) catalog.ACL {
	return catalog.ACL{Principal: principal, ResourceType: rt, PatternType: pt, ResourceName: name, Operation: op, Permission: perm}
}

func (e *env) listACLs(f catalog.ACLFilter) []catalog.ACL {
	e.t.Helper()
	got, err := e.b.ListACLs(e.ctx, f)
	if err != nil {
		e.t.Fatalf("ListACLs(%+v): %v", f, err)
	}
	return got
}

// ACLs are stored, listed in order, and deleted by filter; an empty
// catalog lists none.
func aclCreateListDelete(e *env) {
	if got := e.listACLs(catalog.ACLFilter{}); len(got) != 0 {
		e.t.Fatalf("a new catalog lists ACLs %v", got)
	}
	a := acl("User:alice", catalog.ResourceTopic, catalog.PatternLiteral, "orders", catalog.OpProduce, catalog.Allow)
	b := acl("User:alice", catalog.ResourceTopic, catalog.PatternPrefix, "orders.", catalog.OpConsume, catalog.Allow)
	c := acl("User:bob", catalog.ResourceGroup, catalog.PatternLiteral, "*", catalog.OpAll, catalog.Deny)
	if err := e.b.CreateACLs(e.ctx, []catalog.ACL{c, b, a}); err != nil {
		e.t.Fatalf("CreateACLs: %v", err)
	}
	want := []catalog.ACL{a, b, c}
	slices.SortFunc(want, catalog.CompareACL)
	if got := e.listACLs(catalog.ACLFilter{}); !slices.Equal(got, want) {
		e.t.Fatalf("ListACLs = %v, want %v", got, want)
	}
	gone, err := e.b.DeleteACLs(e.ctx, catalog.ACLFilter{Principal: "User:alice"})
	if err != nil || len(gone) != 2 {
		e.t.Fatalf("DeleteACLs(alice) = %v, %v; want her 2", gone, err)
	}
	if got := e.listACLs(catalog.ACLFilter{}); !slices.Equal(got, []catalog.ACL{c}) {
		e.t.Fatalf("after the delete: %v, want [%v]", got, c)
	}
	if gone, err := e.b.DeleteACLs(e.ctx, catalog.ACLFilter{Principal: "User:alice"}); err != nil || len(gone) != 0 {
		e.t.Fatalf("a second DeleteACLs = %v, %v; want none", gone, err)
	}
}

// Creating an ACL that exists changes nothing (an ACL is its six fields).
func aclIdempotent(e *env) {
	a := acl("Service:ingest-1", catalog.ResourceCluster, catalog.PatternLiteral, catalog.ClusterName, catalog.OpAdmin, catalog.Allow)
	for range 3 {
		if err := e.b.CreateACLs(e.ctx, []catalog.ACL{a, a}); err != nil {
			e.t.Fatalf("CreateACLs: %v", err)
		}
	}
	if got := e.listACLs(catalog.ACLFilter{}); !slices.Equal(got, []catalog.ACL{a}) {
		e.t.Fatalf("ListACLs = %v, want [%v]", got, a)
	}
	var ve *catalog.ValidationError
	bad := a
	bad.ResourceName = "other"
	if err := e.b.CreateACLs(e.ctx, []catalog.ACL{bad}); !errors.As(err, &ve) || ve.Field != "resource_name" {
		e.t.Fatalf("a cluster ACL named %q: %v; want a ValidationError on resource_name", bad.ResourceName, err)
	}
}

// Each filter field selects on its own and together with the others.
func aclFilters(e *env) {
	all := []catalog.ACL{
		acl("User:alice", catalog.ResourceTopic, catalog.PatternLiteral, "orders", catalog.OpProduce, catalog.Allow),
		acl("User:alice", catalog.ResourceTopic, catalog.PatternLiteral, "orders", catalog.OpProduce, catalog.Deny),
		acl("User:alice", catalog.ResourceSubject, catalog.PatternPrefix, "orders-", catalog.OpAlter, catalog.Allow),
		acl("User:*", catalog.ResourceTopic, catalog.PatternLiteral, "*", catalog.OpDescribe, catalog.Allow),
		acl("User:bob", catalog.ResourceTrigger, catalog.PatternLiteral, "t1", catalog.OpDelete, catalog.Allow),
		acl("User:bob", catalog.ResourceTransactionalID, catalog.PatternPrefix, "app-", catalog.OpProduce, catalog.Allow),
	}
	if err := e.b.CreateACLs(e.ctx, all); err != nil {
		e.t.Fatalf("CreateACLs: %v", err)
	}
	for _, c := range []struct {
		f    catalog.ACLFilter
		want int
	}{
		{catalog.ACLFilter{}, 6},
		{catalog.ACLFilter{Principal: "User:alice"}, 3},
		{catalog.ACLFilter{Principal: "User:*"}, 1},
		{catalog.ACLFilter{ResourceType: catalog.ResourceTopic}, 3},
		{catalog.ACLFilter{PatternType: catalog.PatternPrefix}, 2},
		{catalog.ACLFilter{ResourceName: "orders"}, 2},
		{catalog.ACLFilter{Operation: catalog.OpProduce}, 3},
		{catalog.ACLFilter{Permission: catalog.Deny}, 1},
		{catalog.ACLFilter{Principal: "User:alice", Operation: catalog.OpProduce, Permission: catalog.Allow}, 1},
		{catalog.ACLFilter{Principal: "User:carol"}, 0},
	} {
		if got := e.listACLs(c.f); len(got) != c.want {
			e.t.Errorf("ListACLs(%+v) = %d ACLs %v, want %d", c.f, len(got), got, c.want)
		}
	}
}

// Names with every character ACLs take (URIs, e-mail addresses, '/', ':')
// round-trip; a call of MaxACLsPerCall works and one more is refused.
func aclManyAndOdd(e *env) {
	odd := []catalog.ACL{
		acl("User:spiffe://sluice.test/ns/prod/sa/app", catalog.ResourceSubject, catalog.PatternLiteral, "com.example/Orders:v1-value", catalog.OpAll, catalog.Allow),
		acl("User:alice@example.com", catalog.ResourceGroup, catalog.PatternPrefix, "team/a/", catalog.OpCommit, catalog.Allow),
		acl("Service:ingest-1.sluice.svc", catalog.ResourceTopic, catalog.PatternLiteral, "ünïcode", catalog.OpConsume, catalog.Deny),
	}
	if err := e.b.CreateACLs(e.ctx, odd); err != nil {
		e.t.Fatalf("CreateACLs: %v", err)
	}
	batch := make([]catalog.ACL, catalog.MaxACLsPerCall)
	for i := range batch {
		batch[i] = acl("User:load", catalog.ResourceTopic, catalog.PatternLiteral, fmt.Sprintf("t-%03d", i), catalog.OpProduce, catalog.Allow)
	}
	if err := e.b.CreateACLs(e.ctx, batch); err != nil {
		e.t.Fatalf("CreateACLs of %d: %v", len(batch), err)
	}
	got := e.listACLs(catalog.ACLFilter{})
	if len(got) != len(odd)+len(batch) {
		e.t.Fatalf("ListACLs = %d ACLs, want %d", len(got), len(odd)+len(batch))
	}
	for _, a := range odd {
		if !slices.Contains(got, a) {
			e.t.Fatalf("ACL %+v did not round-trip", a)
		}
	}
	if gone, err := e.b.DeleteACLs(e.ctx, catalog.ACLFilter{Principal: "User:load"}); err != nil || len(gone) != len(batch) {
		e.t.Fatalf("DeleteACLs(load) = %d, %v; want %d", len(gone), err, len(batch))
	}
	var ve *catalog.ValidationError
	if err := e.b.CreateACLs(e.ctx, append(batch, batch[0])); !errors.As(err, &ve) {
		e.t.Fatalf("CreateACLs of %d: %v; want a ValidationError", len(batch)+1, err)
	}
}

// Concurrent creates of different ACLs all land.
func aclConcurrent(e *env) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 5 {
				a := acl(fmt.Sprintf("User:w%d", w), catalog.ResourceTopic, catalog.PatternLiteral, fmt.Sprintf("t%d", i), catalog.OpProduce, catalog.Allow)
				if err := e.b.CreateACLs(e.ctx, []catalog.ACL{a}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("concurrent CreateACLs: %v", err)
	}
	if got := e.listACLs(catalog.ACLFilter{}); len(got) != 40 {
		e.t.Fatalf("ListACLs = %d ACLs after 8×5 concurrent creates, want 40", len(got))
	}
}
