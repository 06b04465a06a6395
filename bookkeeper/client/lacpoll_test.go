package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// lacSpy counts LAC watches per bookie address (registrations sent on the
// WatchLac stream) and can stall one address's answers (as a paused bookie
// would: none arrive until the stream is cancelled).
type lacSpy struct {
	mu      sync.Mutex
	calls   map[string]int
	stalled string
}

func (s *lacSpy) dial(t testing.TB) func(string) bookiev1connect.BookieServiceClient {
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	return func(addr string) bookiev1connect.BookieServiceClient {
		spy := spyInterceptor{s: s, addr: addr}
		return bookiev1connect.NewBookieServiceClient(hc, "http://"+addr, connect.WithGRPC(), connect.WithInterceptors(spy))
	}
}

type spyInterceptor struct {
	s    *lacSpy
	addr string
}

func (i spyInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (i spyInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func (i spyInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if !strings.HasSuffix(spec.Procedure, "/WatchLac") {
			return conn
		}
		return &spyConn{StreamingClientConn: conn, i: i, ctx: ctx}
	}
}

type spyConn struct {
	connect.StreamingClientConn
	i   spyInterceptor
	ctx context.Context
}

func (c *spyConn) Send(m any) error {
	n := 0
	for _, w := range m.(*bookiev1.WatchLacRequest).GetWatches() {
		if !w.GetCancel() {
			n++
		}
	}
	c.i.s.mu.Lock()
	c.i.s.calls[c.i.addr] += n
	c.i.s.mu.Unlock()
	return c.StreamingClientConn.Send(m)
}

func (c *spyConn) Receive(m any) error {
	err := c.StreamingClientConn.Receive(m)
	c.i.s.mu.Lock()
	stalled := c.i.s.stalled == c.i.addr
	c.i.s.mu.Unlock()
	if stalled {
		<-c.ctx.Done()
		return connect.NewError(connect.CodeCanceled, c.ctx.Err())
	}
	return err
}

func (s *lacSpy) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// WaitLAC long-polls one bookie at a time: a tail that advances often costs
// one watch per advance, not one per bookie; and when the bookie it asks
// stops answering, the next one is asked after SpeculativeLacTimeout, so
// the reader still wakes promptly (and asks that one first from then on).
func TestWaitLACAsksOneBookieAtATime(t *testing.T) {
	cl := newCluster(t, 3)
	wc := cl.client(t)
	spy := &lacSpy{calls: map[string]int{}}
	rc := cl.client(t, func(cfg *Config) {
		cfg.Dial = spy.dial(t)
		cfg.LacPollTimeout = 20 * time.Second // far beyond the test's waits
		cfg.SpeculativeLacTimeout = 300 * time.Millisecond
		cfg.MetadataRefreshInterval = time.Minute
	})
	w, err := wc.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := rc.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for e := int64(0); e < n; e++ {
		woke := make(chan error, 1)
		go func() {
			_, err := r.WaitLAC(ctxT(t), e-1)
			woke <- err
		}()
		appendN(t, w, e, e)
		if err := <-woke; err != nil {
			t.Fatal(err)
		}
	}
	// One poll per advance; a few more if an append took longer than the
	// speculative timeout on a loaded machine. Asking every bookie would be
	// 3 per advance.
	if got := spy.total(); got > n+n/2 {
		t.Fatalf("%d LAC watches for %d advances; want about one each", got, n)
	}

	// Stall the bookie asked first: the next one answers.
	r.mu.Lock()
	first := r.meta.Ensembles[0].Bookies[r.lacFirst]
	r.mu.Unlock()
	cl.mu.Lock()
	spy.mu.Lock()
	spy.stalled = cl.bookies[first].addr
	spy.mu.Unlock()
	cl.mu.Unlock()
	woke := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := r.WaitLAC(ctxT(t), n-1)
		woke <- err
	}()
	appendN(t, w, n, n)
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitLAC took %v with its first bookie stalled; want about the speculative timeout", d)
	}
	r.mu.Lock()
	now := r.meta.Ensembles[0].Bookies[r.lacFirst]
	r.mu.Unlock()
	if now == first {
		t.Fatalf("the stalled bookie %s is still asked first", first)
	}
}

// A writer that closes its ledger says so to the bookies (it fences them):
// a reader long-polling the tail learns of the close at once, not after its
// poll round or its next metadata refresh.
func TestWaitLACLearnsOfACloseAtOnce(t *testing.T) {
	cl := newCluster(t, 3)
	wc := cl.client(t)
	rc := cl.client(t, func(cfg *Config) {
		cfg.LacPollTimeout = 20 * time.Second
		cfg.MetadataRefreshInterval = time.Minute
	})
	w, err := wc.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	r, err := rc.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	// Past 2: the bookie asked may be the one beyond the ack quorum, not
	// yet at the last entries (the idle writer's LAC push brings it there).
	if lac, err := r.WaitLAC(ctxT(t), 2); err != nil || lac < 3 {
		t.Fatalf("WaitLAC = %d, %v", lac, err)
	}
	woke := make(chan error, 1)
	go func() {
		_, err := r.WaitLAC(ctxT(t), 4)
		woke <- err
	}()
	time.Sleep(50 * time.Millisecond) // the long-poll is waiting
	start := time.Now()
	if _, err := w.Close(ctxT(t), 104); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if !errors.Is(err, ErrLedgerSealed) {
			t.Fatalf("WaitLAC after the close: %v; want ErrLedgerSealed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitLAC did not learn of the close within 10 s (its poll round is 20 s, its refresh 1 min)")
	}
	t.Logf("WaitLAC learned of the close %v after Close returned", time.Since(start))
}

// WaitLACEntries brings the entries of the advance with the LAC: verified,
// in order from previous+1, never beyond the LAC, within the byte bound,
// and without a read of their own.
func TestWaitLACEntries(t *testing.T) {
	cl := newCluster(t, 3)
	wc := cl.client(t)
	spy := &lacSpy{calls: map[string]int{}}
	rc := cl.client(t, func(cfg *Config) { cfg.Dial = spy.dial(t) })
	w, err := wc.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := rc.OpenReader(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	prev, next := int64(-1), int64(0)
	for round := range 4 {
		appendN(t, w, next, next+int64(round))
		next += int64(round) + 1
		reads := rc.Stats().ReadsSent
		maxBytes := 1 << 20
		if round == 3 {
			maxBytes = 1 // at least one entry even so
		}
		lac, ents, err := r.WaitLACEntries(ctxT(t), prev, maxBytes)
		if err != nil || lac <= prev {
			t.Fatalf("round %d: WaitLACEntries(%d) = %d, %v", round, prev, lac, err)
		}
		if len(ents) == 0 || (maxBytes == 1 && len(ents) != 1) {
			t.Fatalf("round %d: %d entries for LAC %d after %d (byte bound %d)", round, len(ents), lac, prev, maxBytes)
		}
		for i, en := range ents {
			if en.ID != prev+1+int64(i) || en.ID > lac || !bytes.Equal(en.Payload, payload(en.ID)) {
				t.Fatalf("round %d: entry %d of the answer is %d (%q); LAC %d", round, i, en.ID, en.Payload, lac)
			}
		}
		if got := rc.Stats().ReadsSent; got != reads {
			t.Fatalf("round %d: %d reads sent while waiting for the LAC", round, got-reads)
		}
		prev = lac
	}
	if _, _, err := r.WaitLACEntries(ctxT(t), prev, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative byte bound: %v", err)
	}
}

// The long-polls of every reader of a client share one WatchLac stream per
// bookie: eight readers following eight ledgers through many advances open
// at most one stream per bookie, and each wakes with its own ledger's LAC.
func TestReadersShareOneWatchStreamPerBookie(t *testing.T) {
	cl := newCluster(t, 3)
	wc := cl.client(t)
	rc := cl.client(t)
	const ledgers, rounds = 8, 5
	var ws []*Writer
	var rs []*Reader
	for range ledgers {
		w, err := wc.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
		if err != nil {
			t.Fatal(err)
		}
		r, err := rc.OpenReader(ctxT(t), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		ws, rs = append(ws, w), append(rs, r)
	}
	for e := range int64(rounds) {
		errs := make(chan error, ledgers)
		for i, r := range rs {
			go func() {
				lac, err := r.WaitLAC(ctxT(t), e-1)
				if err == nil && lac != e {
					err = fmt.Errorf("reader %d woke at LAC %d; want %d", i, lac, e)
				}
				errs <- err
			}()
		}
		for _, w := range ws {
			appendN(t, w, e, e)
		}
		for range ledgers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	st := rc.Stats()
	if st.WatchStreamsOpened < 1 || st.WatchStreamsOpened > 3 {
		t.Fatalf("%d WatchLac streams opened for %d readers on 3 bookies; want at most one per bookie", st.WatchStreamsOpened, ledgers)
	}
	if st.LacWatches < ledgers*rounds {
		t.Fatalf("%d watches for %d waits", st.LacWatches, ledgers*rounds)
	}
	t.Logf("%d watches on %d streams", st.LacWatches, st.WatchStreamsOpened)
}
