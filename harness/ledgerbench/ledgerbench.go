// Package ledgerbench measures the ledger tier the way the [bookkeeper]
// issue asks: real bookie processes on their own data directories, E3/Qw3/Qa2
// ledgers written by the ledger client with fsync before every
// acknowledgement, at 1 KiB and 64 KiB entries, open-loop at a fixed rate
// or closed-loop at the maximum; it reports entries/s, MB/s, add latency
// percentiles and bookie CPU per GB, next to a raw write+fdatasync probe of
// the same disk (the bound group commit works against).
//
// It is test support (harness/README.md): `sluice bench ledger` runs it;
// nothing the services run imports it.
package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

// Config is one benchmark run.
type Config struct {
	Bin       string // sluice binary
	Dir       string // scratch directory (bookie data, catalog)
	Bookies   int    // processes (default 3)
	Scenarios []Scenario
	Progress  io.Writer // one line per second per scenario; nil for none
}

// Scenario is one measured workload.
type Scenario struct {
	Name       string
	EntryBytes int
	Writers    int           // ledgers written concurrently
	Window     int           // unacknowledged appends per writer (closed loop)
	Rate       float64       // entries/s over all writers; 0 = as fast as the window allows
	Warmup     time.Duration // not measured
	Duration   time.Duration // measured
}

// Result is one scenario's figures.
type Result struct {
	Scenario            Scenario
	Entries             int64
	Seconds             float64
	EntriesPerSec       float64
	MBPerSec            float64
	P50, P99, P999, Max time.Duration
	BookieCPUSec        float64 // all bookie processes, during the measured window
	CPUSecPerGB         float64 // bookie CPU seconds per GB of entries (each entry counted once)
	Errors              int64
	// AddsPerMessage and ResultsPerResponse: how many adds one AddEntries
	// message carried and how many answers one response, on average over
	// the measured window (the client's and bookies' batching).
	AddsPerMessage, ResultsPerResponse float64
}

// Probe is the raw disk bound: write n bytes + fdatasync in a loop.
type Probe struct {
	Bytes     int
	SyncsPerS float64
	MBPerSec  float64
	P50, P99  time.Duration
}

// Run starts the bookies, runs every scenario one after the other, stops
// the bookies, and probes the disk.
func Run(ctx context.Context, cfg Config) ([]Result, []Probe, error) {
	if cfg.Bookies == 0 {
		cfg.Bookies = 3
	}
	procs := make([]*bookieproc.Proc, cfg.Bookies)
	defer func() {
		for _, p := range procs {
			if p != nil {
				_ = p.Stop()
			}
		}
	}()
	cat, err := embedded.Open(filepath.Join(cfg.Dir, "catalog"), embedded.Options{})
	if err != nil {
		return nil, nil, err
	}
	defer cat.Close()
	for i := range procs {
		addr, err := bookieproc.FreeAddr()
		if err != nil {
			return nil, nil, err
		}
		p := &bookieproc.Proc{ID: fmt.Sprintf("bookie-%d", i+1), Addr: addr, Dir: filepath.Join(cfg.Dir, fmt.Sprintf("bookie-%d", i+1)), Bin: cfg.Bin}
		procs[i] = p
		if err := p.Start(); err != nil {
			return nil, nil, err
		}
		if _, err := cat.HeartbeatBookie(ctx, catalog.Bookie{ID: p.ID, Address: p.Addr, TotalBytes: 1 << 40, FreeBytes: 1 << 40}, 10*time.Minute); err != nil {
			return nil, nil, err
		}
	}
	cl, err := client.New(client.Config{Ledgers: cat, Bookies: cat, MaxEntryBytes: 8 << 20})
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	var results []Result
	for _, sc := range cfg.Scenarios {
		r, err := runScenario(ctx, cl, procs, sc, cfg.Progress)
		if err != nil {
			return results, nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		results = append(results, r)
	}
	var probes []Probe
	for _, n := range []int{1 << 10, 64 << 10, 512 << 10} {
		p, err := probe(ctx, filepath.Join(cfg.Dir, "probe"), n, 2*time.Second)
		if err != nil {
			return results, probes, err
		}
		probes = append(probes, p)
	}
	return results, probes, nil
}

func runScenario(ctx context.Context, cl *client.Client, procs []*bookieproc.Proc, sc Scenario, progress io.Writer) (Result, error) {
	if sc.Writers < 1 || sc.Window < 1 || sc.EntryBytes < 1 || sc.Duration <= 0 {
		return Result{}, errors.New("writers, window, entry bytes and duration must be positive")
	}
	writers := make([]*client.Writer, sc.Writers)
	for i := range writers {
		w, err := cl.CreateLedger(ctx, catalog.LedgerSpec{
			Topic: "bench", TopicID: "bench", Partition: i, Replication: catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
			WriterOwner: "ledgerbench", WriterEpoch: 1,
		})
		if err != nil {
			return Result{}, err
		}
		writers[i] = w
	}
	payload := make([]byte, sc.EntryBytes)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	var (
		mu        sync.Mutex
		lat       []time.Duration
		measuring bool
		entries   int64
		errs      int64
	)
	start := time.Now()
	measureFrom := start.Add(sc.Warmup)
	end := measureFrom.Add(sc.Duration)
	var cpu0 float64
	var stats0 client.Stats
	cpuTaken := false
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for wi, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			window := make(chan struct{}, sc.Window)
			var interval time.Duration
			if sc.Rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(len(writers)) / sc.Rate)
			}
			next := time.Now().Add(time.Duration(wi) * interval / time.Duration(len(writers)))
			for {
				var intended time.Time
				if interval > 0 {
					// Open loop: the intended send time counts, so queueing
					// behind a slow add is measured (no coordinated omission).
					if d := time.Until(next); d > 0 {
						select {
						case <-time.After(d):
						case <-stop:
							return
						}
					}
					intended, next = next, next.Add(interval)
				}
				select {
				case window <- struct{}{}:
				case <-stop:
					return
				}
				sent := time.Now()
				if intended.IsZero() {
					intended = sent
				}
				err := w.AppendAsync(payload, func(_ int64, err error) {
					done := time.Now()
					<-window
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs++
						return
					}
					if measuring && !intended.Before(measureFrom) && done.Before(end) {
						lat = append(lat, done.Sub(intended))
						entries++
					}
				})
				if err != nil {
					<-window
					mu.Lock()
					errs++
					mu.Unlock()
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for now := time.Now(); now.Before(end); now = time.Now() {
		if !cpuTaken && !now.Before(measureFrom) {
			cpu0 = bookieCPU(procs)
			stats0 = cl.Stats()
			mu.Lock()
			measuring = true
			mu.Unlock()
			cpuTaken = true
		}
		select {
		case <-ctx.Done():
			close(stop)
			wg.Wait()
			return Result{}, ctx.Err()
		case <-tick.C:
		}
		if progress != nil {
			mu.Lock()
			fmt.Fprintf(progress, "  %s: %5.1fs  %d entries measured, %d errors\n", sc.Name, time.Since(start).Seconds(), entries, errs)
			mu.Unlock()
		}
	}
	cpu1 := bookieCPU(procs)
	stats1 := cl.Stats()
	close(stop)
	wg.Wait()
	for _, w := range writers {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, _ = w.Close(cctx, 0)
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	secs := sc.Duration.Seconds()
	r := Result{Scenario: sc, Entries: entries, Seconds: secs, Errors: errs, BookieCPUSec: cpu1 - cpu0}
	r.EntriesPerSec = float64(entries) / secs
	r.MBPerSec = r.EntriesPerSec * float64(sc.EntryBytes) / 1e6
	if gb := float64(entries) * float64(sc.EntryBytes) / 1e9; gb > 0 {
		r.CPUSecPerGB = r.BookieCPUSec / gb
	}
	if n := stats1.AddMessagesSent - stats0.AddMessagesSent; n > 0 {
		r.AddsPerMessage = float64(stats1.AddsSent-stats0.AddsSent) / float64(n)
	}
	if n := stats1.AddResponses - stats0.AddResponses; n > 0 {
		// Each add sent is answered once (failures aside).
		r.ResultsPerResponse = float64(stats1.AddsSent-stats0.AddsSent) / float64(n)
	}
	if progress != nil {
		fmt.Fprintf(progress, "  %s: %.1f adds per AddEntries message, %.1f answers per response\n", sc.Name, r.AddsPerMessage, r.ResultsPerResponse)
	}
	slices.Sort(lat)
	r.P50, r.P99, r.P999 = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999)
	if len(lat) > 0 {
		r.Max = lat[len(lat)-1]
	}
	return r, nil
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func bookieCPU(procs []*bookieproc.Proc) float64 {
	var sum float64
	for _, p := range procs {
		if s, err := bookieproc.CPUSeconds(p.Pid()); err == nil {
			sum += s
		}
	}
	return sum
}

// probe writes n bytes and fdatasyncs, in a loop, for d.
func probe(ctx context.Context, dir string, n int, d time.Duration) (Probe, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Probe{}, err
	}
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		return Probe{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, n)
	var lat []time.Duration
	start := time.Now()
	var written int64
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return Probe{}, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return Probe{}, err
		}
		lat = append(lat, time.Since(t))
		written += int64(n)
		if written > 1<<30 {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return Probe{}, err
			}
			written = 0
		}
	}
	secs := time.Since(start).Seconds()
	slices.Sort(lat)
	return Probe{Bytes: n, SyncsPerS: float64(len(lat)) / secs, MBPerSec: float64(len(lat)) * float64(n) / secs / 1e6, P50: pct(lat, 0.5), P99: pct(lat, 0.99)}, nil
}

// Markdown renders results as tables.
func Markdown(w io.Writer, results []Result, probes []Probe) {
	fmt.Fprintln(w, "| scenario | entry | writers × window | target rate | entries/s | MB/s | add p50 | p99 | p99.9 | max | bookie CPU s/GB | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		rate := "max"
		if r.Scenario.Rate > 0 {
			rate = fmt.Sprintf("%.0f/s", r.Scenario.Rate)
		}
		fmt.Fprintf(w, "| %s | %s | %d × %d | %s | %.0f | %.1f | %s | %s | %s | %s | %.1f | %d |\n",
			r.Scenario.Name, size(r.Scenario.EntryBytes), r.Scenario.Writers, r.Scenario.Window, rate,
			r.EntriesPerSec, r.MBPerSec, ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Max), r.CPUSecPerGB, r.Errors)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Raw disk bound (one file, write + fdatasync in a loop, same disk):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| write size | syncs/s | MB/s | p50 | p99 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, p := range probes {
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %s | %s |\n", size(p.Bytes), p.SyncsPerS, p.MBPerSec, ms(p.P50), ms(p.P99))
	}
}

func size(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
