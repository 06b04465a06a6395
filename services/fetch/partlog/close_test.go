package partlog

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Close waits for every goroutine the logs started, and none starts once
// it began: tail watchers and chain re-reads started by reads racing Close
// are all gone when it returns. (A goroutine was counted (wg.Add) after a
// check of the logs' context, so Close could cancel and Wait between the
// two and return while a watcher started.)
func TestNoGoroutineOutlivesClose(t *testing.T) {
	_, parts, first, now := chainFixture(t, 8, time.Second)
	first.Close()
	for round := range 100 {
		ls, err := New(first.cfg, parts, first.lc)
		if err != nil {
			t.Fatal(err)
		}
		now.Add(int64(2 * time.Second)) // every cached chain is stale: reads re-read it in the background
		var callers sync.WaitGroup
		for p := range 8 {
			callers.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				defer cancel()
				for ctx.Err() == nil {
					ls.Follow("t", p, make(chan struct{}, 1))()
					_, _ = ls.Read(ctx, "t", p, 0, Limits{MaxRecords: 1, MaxBytes: 1 << 10})
					_ = ls.Wait(ctx, "t", p, 0)
				}
			})
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		ls.Close()
		if n := partlogGoroutines(); n > 0 {
			t.Fatalf("round %d: %d goroutines of the logs run after Close returned", round, n)
		}
		callers.Wait()
		if n := partlogGoroutines(); n > 0 {
			t.Fatalf("round %d: %d goroutines of the logs started after Close returned", round, n)
		}
	}
}

// partlogGoroutines counts the goroutines running a function of Logs or
// Log other than the callers' (Follow, Read, Wait and what they call).
func partlogGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "partlog.TestNoGoroutineOutlivesClose") {
			continue
		}
		if strings.Contains(g, "partlog.(*Log).watch(") || strings.Contains(g, "partlog.(*Log).chainCachedAge.func") {
			n++
		}
	}
	return n
}
