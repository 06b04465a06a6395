package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Appends are acknowledged in entry order, each callback once; Close seals
// the ledger at the last entry with the caller's offset; every entry reads
// back; with E > Qw each entry lives on its stripe only.
func TestAppendCloseRead(t *testing.T) {
	for _, rep := range []catalog.Replication{
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
	} {
		t.Run("", func(t *testing.T) {
			cl := newCluster(t, 3)
			c := cl.client(t)
			w, err := c.CreateLedger(ctxT(t), spec(rep))
			if err != nil {
				t.Fatal(err)
			}
			const n = 300
			var mu sync.Mutex
			var order []int64
			done := make(chan struct{})
			for e := int64(0); e < n; e++ {
				err := w.AppendAsync(payload(e), func(entry int64, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("entry %d: %v", entry, err)
					}
					order = append(order, entry)
					if len(order) == n {
						close(done)
					}
				})
				if err != nil {
					t.Fatalf("append %d: %v", e, err)
				}
			}
			<-done
			for i, e := range order {
				if e != int64(i) {
					t.Fatalf("callback %d was for entry %d", i, e)
				}
			}
			if w.LAC() != n-1 {
				t.Fatalf("LAC %d", w.LAC())
			}
			m, err := w.Close(ctxT(t), 100+n-1)
			if err != nil {
				t.Fatal(err)
			}
			if m.State != catalog.LedgerClosed || m.LastEntry != n-1 || m.LastOffset != 100+n-1 {
				t.Fatalf("closed metadata %+v", m)
			}
			if _, err := w.Append(ctxT(t), []byte("late")); !errors.Is(err, ledger.ErrClosed) {
				t.Fatalf("append after close: %v", err)
			}
			readAll(t, c, w.ID(), n-1)

			// Striping: entry e is on positions e%E .. e%E+Qw-1 only, and
			// on all of them: Close lets the adds beyond the ack quorum
			// land (for up to writeBackWait) before it ends the streams.
			// Before it waited, about 1 run in 30 left a bookie without the
			// first entries.
			ens := m.Ensembles[0].Bookies
			for e := int64(0); e < 6; e++ {
				for pos, b := range ens {
					inSet := (int64(pos)-e%3+3)%3 < int64(rep.WriteQuorum)
					_, err := rawRead(t, cl.rpc(t, b), w.ID(), e)
					switch {
					case inSet && err != nil:
						t.Errorf("entry %d missing on %s (position %d): %v", e, b, pos, err)
					case !inSet && connect.CodeOf(err) != connect.CodeNotFound:
						t.Errorf("entry %d on %s (position %d) outside its write set: %v", e, b, pos, err)
					}
				}
			}
		})
	}
}

// An empty ledger closes with LastEntry -1 and LastOffset FirstOffset-1.
func TestCloseEmpty(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Close(ctxT(t), 500) // ignored: the ledger is empty
	if err != nil {
		t.Fatal(err)
	}
	if m.LastEntry != -1 || m.LastOffset != 99 || m.State != catalog.LedgerClosed {
		t.Fatalf("closed metadata %+v", m)
	}
	if m2, err := w.Close(ctxT(t), 500); err != nil || m2.Version != m.Version {
		t.Fatalf("second Close: %+v, %v", m2, err)
	}
}

// A bookie that dies mid-stream is replaced by a spare (ensemble change
// stored in the catalog), appends go on, and every acknowledged entry reads
// back from the right segment.
func TestEnsembleChangeOnBookieFailure(t *testing.T) {
	cl := newCluster(t, 4)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 49)
	cl.stopBookie("b2")
	appendN(t, w, 50, 149)
	// Qa=2: the appends need not wait for the change, which lands soon.
	eventually(t, "the ensemble change", func() bool { return len(w.Metadata().Ensembles) == 2 })
	m := w.Metadata()
	// The new segment starts at the writer's LAC+1 when it noticed the
	// failure: with Qa=2 some entries after the stop may already have been
	// acknowledged by b1 and b3 alone, so anywhere in (0, 150).
	if len(m.Ensembles) != 2 || m.Ensembles[1].Bookies[1] != "b4" || m.Ensembles[1].FirstEntry < 1 || m.Ensembles[1].FirstEntry > 149 {
		t.Fatalf("ensembles after the change: %+v", m.Ensembles)
	}
	if s := c.Stats(); s.EnsembleChanges != 1 {
		t.Fatalf("stats %+v", s)
	}
	m, err = w.Close(ctxT(t), 100+149)
	if err != nil {
		t.Fatal(err)
	}
	if m.LastEntry != 149 || len(m.Ensembles) != 2 {
		t.Fatalf("closed metadata %+v", m)
	}
	readAll(t, c, w.ID(), 149)
}

// An add a bookie never answers times out; the bookie is replaced.
func TestAddTimeoutReplacesBookie(t *testing.T) {
	cl := newCluster(t, 3)
	cl.startFake("silent", silentBookie{id: "silent"})
	c := cl.client(t, func(cfg *Config) { cfg.AddTimeout = 100 * time.Millisecond })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "silent", "b2"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 9) // Qa=2: b1 and b2 suffice
	eventually(t, "the silent bookie replaced", func() bool {
		m := w.Metadata()
		return len(m.Ensembles) > 0 && m.Ensembles[len(m.Ensembles)-1].Bookies[1] == "b3"
	})
	appendN(t, w, 10, 19)
	if _, err := w.Close(ctxT(t), 119); err != nil {
		t.Fatal(err)
	}
	readAll(t, c, w.ID(), 19)
}

// With no spare bookie the writer retries the change (spaced by the
// backoff) and gives up after MaxEnsembleChanges, failing pending appends.
// The failed changes are one warning (the rest at debug level) and a
// count in Stats.
func TestNoSpareBookie(t *testing.T) {
	cl := newCluster(t, 3)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := cl.client(t, func(cfg *Config) {
		cfg.MaxEnsembleChanges = 3
		cfg.RetryBackoff = time.Millisecond
		cfg.Logger = logger
	})
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 3}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	cl.stopBookie(w.Metadata().Ensembles[0].Bookies[0])
	_, err = w.Append(ctxT(t), payload(5))
	if !errors.Is(err, ledger.ErrTooManyEnsembleChanges) {
		t.Fatalf("append with no spare: %v", err)
	}
	if _, err := w.Close(ctxT(t), 104); !errors.Is(err, ledger.ErrTooManyEnsembleChanges) {
		t.Fatalf("close: %v", err)
	}
	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	warns, debugs := 0, 0
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "ensemble change failed") {
			switch {
			case strings.Contains(line, "level=WARN"):
				warns++
			case strings.Contains(line, "level=DEBUG"):
				debugs++
			}
		}
	}
	if s := c.Stats(); warns != 1 || debugs < 1 || s.EnsembleChangeFailures != int64(warns+debugs) {
		t.Fatalf("failed ensemble changes: %d warnings, %d debug lines, %d counted; want 1 warning, the rest debug, all counted:\n%s", warns, debugs, s.EnsembleChangeFailures, text)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// With no spare bookie, a failed bookie that comes back rejoins its
// position: the pending entries reach it, the ledger's segments stay as
// they were, and everything reads back.
func TestFailedBookieRejoinsWithoutSpare(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.MaxEnsembleChanges = 60; cfg.RetryBackoff = 10 * time.Millisecond })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 3}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 3)
	victim := w.Metadata().Ensembles[0].Bookies[1]
	cl.stopBookie(victim)
	done := make(chan error, 1)
	go func() {
		_, err := w.Append(ctxT(t), payload(4)) // needs all three (Qa = 3)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("append acknowledged with a bookie of Qa=3 down: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cl.restartBookie(victim)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("append after the bookie came back: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append still waiting 10 s after the bookie came back")
	}
	appendN(t, w, 5, 8)
	if _, err := w.Close(ctxT(t), 108); err != nil {
		t.Fatal(err)
	}
	m, err := c.getLedger(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Ensembles) != 1 || !slices.Contains(m.Ensembles[0].Bookies, victim) {
		t.Fatalf("segments after a rejoin = %+v, want the one original ensemble", m.Ensembles)
	}
	readAll(t, c, w.ID(), 8)
	if e, err := rawRead(t, cl.rpc(t, victim), w.ID(), 4); err != nil || string(e.GetPayload()) != string(payload(4)) {
		t.Fatalf("entry 4 on the rejoined bookie: %v, %v", e, err)
	}
}

// AppendAsync refuses beyond MaxInFlight (callbacks not yet run count);
// Append waits for room instead.
func TestBackpressure(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.MaxInFlight = 4 })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	results := make(chan int64, 10)
	for e := int64(0); e < 4; e++ {
		if err := w.AppendAsync(payload(e), func(entry int64, err error) {
			if entry == 0 {
				<-release // holds the callback goroutine
			}
			results <- entry
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AppendAsync(payload(4), func(int64, error) {}); !errors.Is(err, ledger.ErrInFlightLimit) {
		t.Fatalf("fifth append: %v", err)
	}
	got := make(chan int64, 1)
	go func() {
		e, err := w.Append(context.Background(), payload(4))
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	close(release)
	if e := <-got; e != 4 {
		t.Fatalf("blocking append got entry %d", e)
	}
	for want := int64(0); want < 4; want++ {
		if e := <-results; e != want {
			t.Fatalf("callback order: %d, want %d", e, want)
		}
	}
	if _, err := w.Close(ctxT(t), 104); err != nil {
		t.Fatal(err)
	}
}

// Closing the client aborts open writers; their ledgers stay OPEN.
func TestClientCloseAbortsWriters(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendAsync(payload(3), func(int64, error) {}); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("append after client close: %v", err)
	}
	if _, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("create after close: %v", err)
	}
	m, err := cl.cat.GetLedger(ctxT(t), w.ID())
	if err != nil || m.State != catalog.LedgerOpen {
		t.Fatalf("ledger after client close: %+v, %v", m, err)
	}
}

// An ensemble change that finds the ledger no longer OPEN (a recovery
// began) stops the writer with ErrFenced instead of changing anything.
// (Qa = 3, so entry 5 cannot be acknowledged without the dead bookie.)
func TestEnsembleChangeAfterRecoveryBegan(t *testing.T) {
	cl := newCluster(t, 4)
	c := cl.client(t)
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 3}, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	m, err := cl.cat.GetLedger(ctxT(t), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	m.State = catalog.LedgerInRecovery
	if _, err := cl.cat.UpdateLedger(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	cl.stopBookie("b2")
	if _, err := w.Append(ctxT(t), payload(5)); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("append: %v", err)
	}
	got, err := cl.cat.GetLedger(ctxT(t), w.ID())
	if err != nil || len(got.Ensembles) != 1 || got.State != catalog.LedgerInRecovery {
		t.Fatalf("ledger after the refused change: %+v, %v", got, err)
	}
}

// Add deadlines follow Config.Now: moving the clock times out the adds a
// bookie never answered, with the writer otherwise idle.
func TestAddTimeoutOnInjectedClock(t *testing.T) {
	cl := newCluster(t, 3)
	cl.startFake("silent", silentBookie{id: "silent"})
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	c := cl.client(t, func(cfg *Config) {
		cfg.AddTimeout = 10 * time.Minute
		cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "silent", "b2"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 4)
	if n := len(w.Metadata().Ensembles); n != 1 {
		t.Fatalf("%d segments before any timeout", n)
	}
	now.Add(int64(11 * time.Minute))
	eventually(t, "the silent bookie replaced", func() bool {
		m := w.Metadata()
		return m.Ensembles[len(m.Ensembles)-1].Bookies[1] == "b3"
	})
	if _, err := w.Close(ctxT(t), 104); err != nil {
		t.Fatal(err)
	}
}
