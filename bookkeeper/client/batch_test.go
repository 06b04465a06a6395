package client

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

func TestBatchLen(t *testing.T) {
	adds := func(sizes ...int) []*bookiev1.Add {
		out := make([]*bookiev1.Add, len(sizes))
		for i, n := range sizes {
			out[i] = &bookiev1.Add{EntryId: int64(i), Payload: make([]byte, n)}
		}
		return out
	}
	for _, tc := range []struct {
		name              string
		queued            []*bookiev1.Add
		maxAdds, maxBytes int
		want              int
	}{
		{"one", adds(10), 64, 1000, 1},
		{"all fit", adds(10, 10, 10), 64, 1000, 3},
		{"count bound", adds(1, 1, 1, 1, 1), 3, 1000, 3},
		{"bytes bound", adds(400, 400, 400), 64, 1000, 2},
		{"exact fit", adds(500, 500, 1), 64, 1000, 2},
		{"large first goes alone", adds(5000, 1, 1), 64, 1000, 1},
		{"large later waits", adds(1, 5000), 64, 1000, 1},
		{"empty payloads", adds(0, 0, 0, 0), 2, 1, 2},
	} {
		if got := batchLen(tc.queued, tc.maxAdds, tc.maxBytes); got != tc.want {
			t.Errorf("%s: batchLen = %d; want %d", tc.name, got, tc.want)
		}
	}
}

// addRecorder records, per bookie, the AddEntries messages the bookie
// received (adds and payload bytes of each).
type addRecorder struct {
	mu    sync.Mutex
	msgs  map[string][]recordedMsg
	multi map[string]int // messages carrying adds of more than one ledger
	// lacOnly counts messages carrying only LAC pushes.
	lacOnly int
}

type recordedMsg struct{ adds, bytes int }

func newAddRecorder() *addRecorder {
	return &addRecorder{msgs: map[string][]recordedMsg{}, multi: map[string]int{}}
}

func (r *addRecorder) option(bookie string) connect.HandlerOption {
	return connect.WithInterceptors(recordInterceptor{r, bookie})
}

func (r *addRecorder) messages(bookie string) []recordedMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs[bookie])
}

type recordInterceptor struct {
	r      *addRecorder
	bookie string
}

func (recordInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (recordInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}
func (i recordInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return next(ctx, recordingConn{conn, i})
	}
}

type recordingConn struct {
	connect.StreamingHandlerConn
	i recordInterceptor
}

func (c recordingConn) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if req, ok := m.(*bookiev1.AddEntriesRequest); ok && err == nil {
		adds, n, ledgers := 0, 0, 0
		for _, g := range req.GetLedgers() {
			if len(g.GetAdds()) > 0 {
				ledgers++
			}
			adds += len(g.GetAdds())
			for _, a := range g.GetAdds() {
				n += len(a.GetPayload())
			}
		}
		c.i.r.mu.Lock()
		if adds > 0 {
			c.i.r.msgs[c.i.bookie] = append(c.i.r.msgs[c.i.bookie], recordedMsg{adds, n})
			c.i.r.multi[c.i.bookie] += min(ledgers-1, 1)
		} else { // LAC pushes alone are counted apart
			c.i.r.lacOnly++
		}
		c.i.r.mu.Unlock()
	}
	return err
}

// gatedDial holds every bookie's identity check (the first thing a
// stream's sender does) until gate closes, so adds queue up meanwhile.
func gatedDial(t testing.TB, gate chan struct{}) func(string) bookiev1connect.BookieServiceClient {
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	dial := grpcDialer(hc, false, 8<<20)
	return func(addr string) bookiev1connect.BookieServiceClient { return gatedClient{dial(addr), gate} }
}

type gatedClient struct {
	bookiev1connect.BookieServiceClient
	gate chan struct{}
}

func (g gatedClient) GetStatus(ctx context.Context, req *connect.Request[bookiev1.GetStatusRequest]) (*connect.Response[bookiev1.GetStatusResponse], error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.BookieServiceClient.GetStatus(ctx, req)
}

// Adds queued while a stream's sender is busy go out together, in as few
// messages as MaxAddBatch and MaxAddBatchBytes allow (an entry larger
// than the byte bound alone); every entry is acknowledged, in order, and
// readable.
func TestAddsCoalescedWithinBounds(t *testing.T) {
	hundreds := func(n int) []int { return slices.Repeat([]int{100}, n) }
	for _, tc := range []struct {
		name              string
		maxAdds, maxBytes int
		sizes             []int // payload sizes, in entry order
		want              []recordedMsg
	}{
		{"count", 16, 1 << 20, hundreds(100), append(slices.Repeat([]recordedMsg{{16, 1600}}, 6), recordedMsg{4, 400})},
		{"bytes", 64, 350, slices.Concat(hundreds(5), []int{1000}, hundreds(4)),
			[]recordedMsg{{3, 300}, {2, 200}, {1, 1000}, {3, 300}, {1, 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 0)
			rec := newAddRecorder()
			bookies := []string{"b1", "b2", "b3"}
			for _, b := range bookies {
				cl.startBookie(b, rec.option(b))
			}
			gate := make(chan struct{})
			c := cl.client(t, func(cfg *Config) {
				cfg.Dial = gatedDial(t, gate)
				cfg.MaxAddBatch, cfg.MaxAddBatchBytes = tc.maxAdds, tc.maxBytes
			})
			w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, bookies...))
			if err != nil {
				t.Fatal(err)
			}
			payloads := make([][]byte, len(tc.sizes))
			var mu sync.Mutex
			var acked []int64
			var wg sync.WaitGroup
			for e, n := range tc.sizes {
				payloads[e] = bytes.Repeat([]byte{byte(e)}, n)
				wg.Add(1)
				if err := w.AppendAsync(payloads[e], func(entry int64, err error) {
					defer wg.Done()
					if err != nil {
						t.Errorf("entry %d: %v", entry, err)
					}
					mu.Lock()
					acked = append(acked, entry)
					mu.Unlock()
				}); err != nil {
					t.Fatal(err)
				}
			}
			adds := int64(3 * len(tc.sizes))
			eventually(t, "every add queued", func() bool { return c.Stats().AddsSent == adds })
			close(gate)
			wg.Wait()
			// Qa = 2: callbacks may run before the third bookie read its
			// messages; wait for it before closing the ledger.
			eventually(t, "every bookie received every add", func() bool {
				n := 0
				for _, b := range bookies {
					for _, m := range rec.messages(b) {
						n += m.adds
					}
				}
				return int64(n) == adds
			})
			for i, e := range acked {
				if e != int64(i) {
					t.Fatalf("callbacks for entries %v; want 0..%d in order", acked, len(tc.sizes)-1)
				}
			}
			// Every message the client counted reaches a bookie while the
			// ledger is open; a LAC push after the last add may still be on
			// its way. (Closing ends the idle stream, which may drop a
			// final LAC push: nobody needs it then.)
			received := func() int64 {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				n := int64(rec.lacOnly)
				for _, b := range bookies {
					n += int64(len(rec.msgs[b]))
				}
				return n
			}
			eventually(t, "bookies receive every message the client sent", func() bool {
				return c.Stats().AddMessagesSent == received()
			})
			last := int64(len(tc.sizes) - 1)
			if _, err := w.Close(ctxT(t), 100+last); err != nil {
				t.Fatal(err)
			}
			got, err := c.ReadEntries(ctxT(t), w.ID(), 0, last)
			if err != nil || len(got) != len(payloads) {
				t.Fatalf("read back %d entries: %v", len(got), err)
			}
			for e := range got {
				if !bytes.Equal(got[e], payloads[e]) {
					t.Fatalf("entry %d differs", e)
				}
			}
			for _, b := range bookies {
				if m := rec.messages(b); !slices.Equal(m, tc.want) {
					t.Errorf("bookie %s received messages (adds, payload bytes) %v; want %v", b, m, tc.want)
				}
			}
			st := c.Stats() // responses: at least the Qa = 2 bookies that acknowledged answered
			if st.AddsSent != adds || st.AddResponses < 2 || st.AddResponses > adds {
				t.Errorf("stats: %d adds in %d messages, %d responses", st.AddsSent, st.AddMessagesSent, st.AddResponses)
			}
		})
	}
}

func TestMuxBatch(t *testing.T) {
	add := func(ledger, entry int64, size int) muxItem {
		return muxItem{ledger: ledger, key: []byte{byte(ledger)}, add: &bookiev1.Add{EntryId: entry, Payload: make([]byte, size)}}
	}
	lac := func(ledger, v int64) muxItem { return muxItem{ledger: ledger, key: []byte{byte(ledger)}, lac: v} }
	type group struct {
		ledger  int64
		entries []int64
		lac     int64 // -2: none
	}
	for _, tc := range []struct {
		name              string
		queued            []muxItem
		maxAdds, maxBytes int
		want              []group
		took              int
	}{
		{"one", []muxItem{add(1, 0, 10)}, 64, 1000, []group{{1, []int64{0}, -2}}, 1},
		{"grouped by ledger, in order", []muxItem{add(1, 0, 1), add(2, 0, 1), add(1, 1, 1), add(3, 5, 1), add(2, 1, 1)}, 64, 1000,
			[]group{{1, []int64{0, 1}, -2}, {2, []int64{0, 1}, -2}, {3, []int64{5}, -2}}, 5},
		{"count bound across ledgers", []muxItem{add(1, 0, 1), add(2, 0, 1), add(1, 1, 1)}, 2, 1000,
			[]group{{1, []int64{0}, -2}, {2, []int64{0}, -2}}, 2},
		{"bytes bound", []muxItem{add(1, 0, 400), add(2, 0, 400), add(1, 1, 400)}, 64, 1000,
			[]group{{1, []int64{0}, -2}, {2, []int64{0}, -2}}, 2},
		{"large first goes alone", []muxItem{add(1, 0, 5000), add(2, 0, 1)}, 64, 1000, []group{{1, []int64{0}, -2}}, 1},
		{"lac pushes ride along, the highest kept", []muxItem{lac(1, 3), add(2, 0, 1), lac(1, 5), lac(3, 0)}, 64, 1000,
			[]group{{1, nil, 5}, {2, []int64{0}, -2}, {3, nil, 0}}, 4},
		{"lac pushes are not adds", []muxItem{add(1, 0, 1), lac(2, 7), add(1, 1, 1), add(1, 2, 1)}, 2, 1000,
			[]group{{1, []int64{0, 1}, -2}, {2, nil, 7}}, 3},
	} {
		req, n := muxBatch(tc.queued, tc.maxAdds, tc.maxBytes)
		var got []group
		for _, g := range req.GetLedgers() {
			x := group{ledger: g.GetLedgerId(), lac: -2}
			if g.Lac != nil {
				x.lac = g.GetLac()
			}
			for _, a := range g.GetAdds() {
				x.entries = append(x.entries, a.GetEntryId())
			}
			if len(g.GetMasterKey()) != 1 || g.GetMasterKey()[0] != byte(g.GetLedgerId()) {
				t.Errorf("%s: ledger %d carries master key %v", tc.name, g.GetLedgerId(), g.GetMasterKey())
			}
			got = append(got, x)
		}
		same := n == tc.took && len(got) == len(tc.want)
		for i := 0; same && i < len(got); i++ {
			same = got[i].ledger == tc.want[i].ledger && got[i].lac == tc.want[i].lac && slices.Equal(got[i].entries, tc.want[i].entries)
		}
		if !same {
			t.Errorf("%s: took %d, groups %+v; want %d, %+v", tc.name, n, got, tc.took, tc.want)
		}
	}
}

// Every writer of a client shares one AddEntries stream per bookie: adds
// of many ledgers queued meanwhile go out in messages carrying several
// ledgers, and every writer's entries are acknowledged in order and read
// back.
func TestWritersShareOneStreamPerBookie(t *testing.T) {
	cl := newCluster(t, 0)
	rec := newAddRecorder()
	bookies := []string{"b1", "b2", "b3"}
	for _, b := range bookies {
		cl.startBookie(b, rec.option(b))
	}
	gate := make(chan struct{})
	c := cl.client(t, func(cfg *Config) { cfg.Dial = gatedDial(t, gate) })
	const writers, entries = 8, 20
	ws := make([]*Writer, writers)
	for i := range ws {
		w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, bookies...))
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		var mu sync.Mutex
		next := int64(0)
		for e := range entries {
			wg.Add(1)
			if err := w.AppendAsync(payload(int64(e)), func(entry int64, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil || entry != next {
					t.Errorf("ledger %d: entry %d, %v; want entry %d acknowledged", w.ID(), entry, err, next)
				}
				next++
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, "every add queued", func() bool { return c.Stats().AddsSent == 3*writers*entries })
	close(gate)
	wg.Wait()
	for _, w := range ws {
		if _, err := w.Close(ctxT(t), 100+entries-1); err != nil {
			t.Fatal(err)
		}
		readAll(t, c, w.ID(), entries-1)
	}
	if st := c.Stats(); st.StreamsOpened != 3 {
		t.Errorf("%d AddEntries streams opened for %d writers on 3 bookies; want 3", st.StreamsOpened, writers)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, b := range bookies {
		if rec.multi[b] == 0 {
			t.Errorf("bookie %s received no message carrying several ledgers (%v)", b, rec.msgs[b])
		}
	}
}

// A bookie that leaves adds unanswered breaks the shared stream for every
// writer using it: each replaces the bookie and goes on.
func TestAddTimeoutOnSharedStreamReplacesBookieForAll(t *testing.T) {
	cl := newCluster(t, 3)
	cl.startFake("silent", silentBookie{id: "silent"})
	c := cl.client(t, func(cfg *Config) { cfg.AddTimeout = 100 * time.Millisecond })
	var ws []*Writer
	for range 3 {
		w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "silent", "b2"))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		appendN(t, w, 0, 4) // Qa=2: b1 and b2 suffice
	}
	for _, w := range ws {
		eventually(t, "the silent bookie replaced", func() bool {
			m := w.Metadata()
			return len(m.Ensembles) > 0 && m.Ensembles[len(m.Ensembles)-1].Bookies[1] == "b3"
		})
	}
	for _, w := range ws {
		appendN(t, w, 5, 9)
		if _, err := w.Close(ctxT(t), 109); err != nil {
			t.Fatal(err)
		}
		readAll(t, c, w.ID(), 9)
	}
}
