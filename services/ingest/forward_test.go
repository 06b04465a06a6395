package ingest

import (
	"errors"
	"testing"
	"time"
)

// A forward waiting for room on a forwarding stream (the owner is slow to
// answer: MaxStreamInFlight requests are queued) returns when the stream
// breaks, with UNAVAILABLE, instead of waiting for its caller's deadline
// while it holds the stream's sendMu.
func TestForwardReturnsWhenItsStreamBreaks(t *testing.T) {
	f := newFixture(t, 1)
	a := f.copyOf("a", func(c *Config) { c.MaxStreamInFlight = 1 })
	const owner = "b.test:9092"
	fs, _ := newFwdStream(t.Context(), owner, 1)
	fs.queue <- fwdReq{} // the sender is busy: the queue is full
	a.fwdMu.Lock()
	a.fwdStreams[owner] = fs
	a.fwdMu.Unlock()

	returned := make(chan *forwardCall, 1)
	go func() { returned <- a.forward(t.Context(), owner, f.topic.Name, 0, [][]byte{[]byte("batch")}) }()
	eventually(t, "the forward waits for room", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.pending) == 1
	})
	fs.fail(errors.New("connection reset"))
	select {
	case fc := <-returned:
		<-fc.done
		if !isRetry(fc.err) {
			t.Errorf("the forward on a broken stream: %v; want a retry error (UNAVAILABLE at the edge)", fc.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the forward still waits for room on a broken stream after 5 s")
	}
}
