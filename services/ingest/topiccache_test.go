package ingest

import (
	"sync/atomic"
	"testing"
	"time"
)

// A topic's cached metadata past its TTL (but within twice it) still
// answers requests while one background read refreshes it: a request never
// waits on the catalog for what the copy already has. Before, every
// request that found the entry expired read the catalog itself — every
// TTL, every request of a busy topic stalled on a GetTopic. Past twice
// the TTL the request reads it (stale metadata is not served for ever).
func TestTopicRefreshDoesNotStallRequests(t *testing.T) {
	f := newFixture(t, 1)
	const ttl = 300 * time.Millisecond
	var gets atomic.Int32
	var hook atomic.Pointer[func()]
	hc := &hookedCatalog{Catalog: f.cat, getTopic: func() {
		gets.Add(1)
		if h := hook.Load(); h != nil {
			(*h)()
		}
	}}
	a := f.copyWith("a", hc, func(c *Config) { c.TopicCacheTTL = ttl })
	if _, err := f.produce(a, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + ttl/5) // stale, not yet too old
	reached, resume := make(chan struct{}), make(chan struct{})
	held := pause(reached, resume)
	hook.Store(&held)
	before := gets.Load()
	done := make(chan error, 1)
	go func() {
		for range 3 {
			if _, err := f.produce(a, 0); err != nil {
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
	case <-time.After(ttl / 2):
		close(resume)
		<-done
		t.Fatal("requests on a stale topic entry waited for the catalog")
	}
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("the stale entry was not refreshed")
	}
	if n := gets.Load() - before; n != 1 {
		t.Errorf("%d catalog reads for 3 requests on a stale entry; want 1 (one refresh)", n)
	}
	close(resume)
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.mu.Lock()
		refreshing, age := a.topicRefresh["t"], time.Since(a.topics["t"].fetched)
		a.mu.Unlock()
		if !refreshing && age < ttl {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the refresh: refreshing %v, entry %v old", refreshing, age)
		}
		time.Sleep(5 * time.Millisecond)
	}

	time.Sleep(2*ttl + ttl/5) // too old to answer
	before = gets.Load()
	start := time.Now()
	if _, err := f.produce(a, 0); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	fetched := a.topics["t"].fetched
	a.mu.Unlock()
	if n := gets.Load() - before; n != 1 || fetched.Before(start) {
		t.Errorf("a request on an entry twice the TTL old: %d catalog reads, entry fetched %v before the request; want it read by the request", n, start.Sub(fetched))
	}
}
