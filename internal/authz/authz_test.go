package authz

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// memACLs is an ACL store in memory that counts its reads.
type memACLs struct {
	acls  []catalog.ACL
	reads atomic.Int64
}

func (m *memACLs) CreateACLs(_ context.Context, acls []catalog.ACL) error {
	m.acls = append(m.acls, acls...)
	return nil
}
func (m *memACLs) DeleteACLs(context.Context, catalog.ACLFilter) ([]catalog.ACL, error) {
	return nil, nil
}
func (m *memACLs) ListACLs(context.Context, catalog.ACLFilter) ([]catalog.ACL, error) {
	m.reads.Add(1)
	return append([]catalog.ACL(nil), m.acls...), nil
}

func user(n string) auth.Principal { return auth.Principal{Kind: auth.User, Name: n} }

func allow(p string, rt catalog.ResourceType, pt catalog.PatternType, name string, op catalog.Operation) catalog.ACL {
	return catalog.ACL{Principal: p, ResourceType: rt, PatternType: pt, ResourceName: name, Operation: op, Permission: catalog.Allow}
}

func deny(p string, rt catalog.ResourceType, pt catalog.PatternType, name string, op catalog.Operation) catalog.ACL {
	a := allow(p, rt, pt, name, op)
	a.Permission = catalog.Deny
	return a
}

// The evaluation rules: default deny, literal and prefix and "*" names,
// User:* for every user (not services' business), deny wins, all covers
// every operation, produce/consume/commit/alter/delete imply describe (an
// allow only), super-users and Service principals pass, an anonymous
// caller is User:ANONYMOUS.
func TestDecide(t *testing.T) {
	const T, L, P = catalog.ResourceTopic, catalog.PatternLiteral, catalog.PatternPrefix
	store := &memACLs{acls: []catalog.ACL{
		allow("User:alice", T, L, "orders", catalog.OpProduce),
		allow("User:alice", T, P, "logs.", catalog.OpConsume),
		deny("User:alice", T, L, "logs.secret", catalog.OpConsume),
		allow("User:*", T, L, "public", catalog.OpConsume),
		deny("User:bob", T, L, "*", catalog.OpAll),
		allow("User:bob", T, L, "orders", catalog.OpProduce),
		allow("User:ANONYMOUS", T, L, "open", catalog.OpDescribe),
		allow("User:carol", catalog.ResourceGroup, L, "g", catalog.OpAll),
	}}
	a, err := New(context.Background(), Config{ACLs: store, SuperUsers: []string{"User:root"}})
	if err != nil {
		t.Fatal(err)
	}
	act := func(op catalog.Operation, rt catalog.ResourceType, name string) Action {
		return Action{Op: op, Type: rt, Name: name}
	}
	for _, c := range []struct {
		p    auth.Principal
		act  Action
		want bool
	}{
		{user("alice"), act(catalog.OpProduce, T, "orders"), true},
		{user("alice"), act(catalog.OpConsume, T, "orders"), false},
		{user("alice"), act(catalog.OpDescribe, T, "orders"), true}, // implied by produce
		{user("alice"), act(catalog.OpDelete, T, "orders"), false},
		{user("alice"), act(catalog.OpProduce, T, "orders2"), false}, // literal is exact
		{user("alice"), act(catalog.OpConsume, T, "logs.app"), true},
		{user("alice"), act(catalog.OpConsume, T, "logs.secret"), false}, // deny wins
		{user("alice"), act(catalog.OpDescribe, T, "logs.secret"), true}, // a consume deny does not deny describe
		{user("alice"), act(catalog.OpConsume, T, "logsx"), false},
		{user("alice"), act(catalog.OpConsume, T, "public"), true}, // User:*
		{user("bob"), act(catalog.OpProduce, T, "orders"), false},  // deny all on * wins over allow
		{user("bob"), act(catalog.OpConsume, T, "public"), false},
		{user("carol"), act(catalog.OpCommit, catalog.ResourceGroup, "g"), true}, // all
		{user("carol"), act(catalog.OpCommit, T, "g"), false},                    // another resource type
		{user("dave"), act(catalog.OpDescribe, T, "orders"), false},              // default deny
		{user("root"), act(catalog.OpAdmin, catalog.ResourceCluster, "cluster"), true},
		{auth.Principal{Kind: auth.Service, Name: "ingest-2"}, act(catalog.OpProduce, T, "anything"), true},
		{auth.Principal{Kind: auth.Service, Name: "x"}, act(catalog.OpConsume, T, "public"), true},
		{auth.Principal{}, act(catalog.OpDescribe, T, "open"), true}, // anonymous
		{auth.Principal{}, act(catalog.OpConsume, T, "public"), true},
		{auth.Principal{}, act(catalog.OpProduce, T, "orders"), false},
	} {
		if got := a.Allowed(c.p, c.act); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.p, c.act, got, c.want)
		}
	}
	if err := a.Authorize(user("alice"), act(catalog.OpProduce, T, "orders"), act(catalog.OpConsume, T, "orders")); !IsDenied(err) ||
		err.Error() != `not authorized: User:alice may not consume on topic "orders"` {
		t.Errorf("two actions, the second refused: %v", err)
	}
	if _, err := New(context.Background(), Config{ACLs: store, SuperUsers: []string{"root"}}); err == nil {
		t.Error("a super-user that is not a principal was taken")
	}
}

// The ACLs are read again once Refresh has passed (in the background, one
// read at a time), and at once on Reload.
func TestRefresh(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	store := &memACLs{}
	a, err := New(context.Background(), Config{ACLs: store, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	grant := Action{Op: catalog.OpProduce, Type: catalog.ResourceTopic, Name: "t"}
	_ = store.CreateACLs(context.Background(), []catalog.ACL{allow("User:u", catalog.ResourceTopic, catalog.PatternLiteral, "t", catalog.OpProduce)})
	if a.Allowed(user("u"), grant) {
		t.Fatal("a new ACL held before a refresh")
	}
	now.Add(int64(DefaultRefresh))
	a.Allowed(user("u"), grant) // starts the refresh
	deadline := time.Now().Add(5 * time.Second)
	for !a.Allowed(user("u"), grant) {
		if time.Now().After(deadline) {
			t.Fatal("the ACL did not hold after a refresh")
		}
		time.Sleep(time.Millisecond)
	}
	reads := store.reads.Load()
	for range 100 {
		a.Allowed(user("u"), grant)
	}
	if store.reads.Load() != reads {
		t.Fatalf("%d more reads within the refresh interval", store.reads.Load()-reads)
	}
	store.acls = nil
	if err := a.Reload(context.Background()); err != nil || a.Allowed(user("u"), grant) {
		t.Fatalf("after Reload: %v, still allowed", err)
	}
}

// CommitTxn writes its batches to their topics, and next_partitions adds
// partitions to the next transaction: it needs produce on each topic, as
// ProduceStream and AddPartitionsToTxn would, besides the transactional
// id; EndTxn's next_partitions likewise.
func TestCommitTxnNeedsItsBatchesTopics(t *testing.T) {
	tx := Action{Op: catalog.OpProduce, Type: catalog.ResourceTransactionalID, Name: "tx"}
	topic := func(name string) Action {
		return Action{Op: catalog.OpProduce, Type: catalog.ResourceTopic, Name: name}
	}
	for _, c := range []struct {
		proc string
		req  any
		want []Action
	}{
		{sluicev1connect.ProducerServiceCommitTxnProcedure, &sluicev1.CommitTxnRequest{Session: &sluicev1.TxnSession{TransactionalId: "tx"},
			Produce: []*sluicev1.ProduceRequest{{Topic: "a"}, {Topic: "b"}}, NextPartitions: []*sluicev1.TxnTopic{{Topic: "c"}}},
			[]Action{tx, topic("a"), topic("b"), topic("c")}},
		{sluicev1connect.ProducerServiceEndTxnProcedure, &sluicev1.EndTxnRequest{Session: &sluicev1.TxnSession{TransactionalId: "tx"},
			NextPartitions: []*sluicev1.TxnTopic{{Topic: "c"}}},
			[]Action{tx, topic("c")}},
	} {
		got := Rules[c.proc].Actions(c.req)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: actions %v, want %v", c.proc, got, c.want)
		}
	}
}
