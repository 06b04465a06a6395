package fetch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
)

// hookedCatalog counts GetTopic calls and runs the hook, if any, before
// each.
type hookedCatalog struct {
	fetch.Catalog
	gets atomic.Int32
	hook atomic.Pointer[func()]
}

func (c *hookedCatalog) GetTopic(ctx context.Context, name string) (catalog.Topic, error) {
	c.gets.Add(1)
	if h := c.hook.Load(); h != nil {
		(*h)()
	}
	return c.Catalog.GetTopic(ctx, name)
}

// A topic's cached metadata in the second half of its TTL still answers
// Fetch while one background read refreshes it: a busy topic's reads never
// wait on the catalog for what the copy has. Past the TTL the entry is not
// answered, so a topic deleted through another copy is noticed within it
// (docs/DESIGN.md, "Topic identity").
func TestTopicRefreshDoesNotStallFetches(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 5, 5)
	const ttl = 600 * time.Millisecond
	hc := &hookedCatalog{Catalog: e.c.Catalog}
	_, cons := e.fetchCopy(t, fetch.Config{TopicCacheTTL: ttl},
		fetch.Deps{Catalog: hc, Ledgers: e.c.Ledgers, Bookkeeping: e.c.Bookkeeping})
	ctx := context.Background()
	read := func() error {
		_, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxRecords: 5}))
		return err
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl/2 + ttl/10) // due for a refresh, still fresh enough to answer

	reached, resume := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	held := func() {
		if once.CompareAndSwap(false, true) {
			close(reached)
		}
		<-resume
	}
	hc.hook.Store(&held)
	before := hc.gets.Load()
	done := make(chan error, 1)
	go func() {
		for range 3 {
			if err := read(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(ttl / 4):
		close(resume)
		<-done
		t.Fatal("fetches on an entry due for a refresh waited for the catalog")
	}
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("the entry due for a refresh was not read again")
	}
	if n := hc.gets.Load() - before; n != 1 {
		t.Errorf("%d catalog reads for 3 fetches on an entry due for a refresh; want 1 (one background refresh)", n)
	}
	hc.hook.Store(nil)
	close(resume)

	// Deleted through the cluster's own copies: this one learns it from
	// its cache's TTL, whatever the refreshes did.
	if _, err := e.admin.DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: "t"})); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	for {
		err := read()
		if connect.CodeOf(err) == connect.CodeNotFound {
			break
		}
		if waited := time.Since(deleted); waited > ttl+ttl/2 {
			t.Fatalf("%v after the topic was deleted this copy still answers %v; want NOT_FOUND within its cache TTL %v", waited, err, ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
