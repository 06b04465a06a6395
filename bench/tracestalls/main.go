// Command tracestalls lists where a Go execution trace stalled: the longest
// waits of runnable goroutines for a CPU, the longest syscalls (with the
// stack that made them), and the longest GC phases and stop-the-world
// pauses. It is how the S2 latency tail was read in
// bench/results/2026-12-02-session10-spots.
//
// Take a trace from a server started with --pprof, during the window to
// look at, then read it:
//
//	curl -so bookie.trace 'http://127.0.0.1:17531/debug/pprof/trace?seconds=10'
//	go run . -n 8 bookie.trace
//
// Times are seconds from the trace's first event. A separate module, so
// the main module does not depend on golang.org/x/exp.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

type stall struct {
	d     time.Duration
	at    trace.Time
	g     trace.GoID
	stack string
}

func main() {
	n := flag.Int("n", 12, "entries listed per kind")
	frames := flag.Int("frames", 8, "stack frames shown per syscall")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: tracestalls [-n N] [-frames F] TRACE\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *n, *frames); err != nil {
		fmt.Fprintln(os.Stderr, "tracestalls:", err)
		os.Exit(1)
	}
}

func run(path string, n, frames int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w (a trace from /debug/pprof/trace of Go 1.22 or later?)", path, err)
	}
	runnableSince := map[trace.GoID]trace.Time{}
	syscallSince := map[trace.GoID]trace.Time{}
	syscallStack := map[trace.GoID]string{}
	rangeStart := map[string]trace.Time{}
	var sched, syscalls []stall
	ranges := map[string][]stall{}
	var first trace.Time
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if first == 0 {
			first = ev.Time()
		}
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			switch {
			case to == trace.GoRunnable:
				runnableSince[g] = ev.Time()
			case from == trace.GoRunnable && to == trace.GoRunning:
				if t0, ok := runnableSince[g]; ok {
					sched = append(sched, stall{ev.Time().Sub(t0), ev.Time(), g, ""})
				}
				delete(runnableSince, g)
			}
			if to == trace.GoSyscall {
				syscallSince[g] = ev.Time()
				syscallStack[g] = stackString(ev.Stack(), frames)
			}
			if from == trace.GoSyscall {
				if t0, ok := syscallSince[g]; ok {
					syscalls = append(syscalls, stall{ev.Time().Sub(t0), ev.Time(), g, syscallStack[g]})
				}
				delete(syscallSince, g)
			}
		case trace.EventRangeBegin:
			rangeStart[ev.Range().Name] = ev.Time()
		case trace.EventRangeEnd:
			name := ev.Range().Name
			if t0, ok := rangeStart[name]; ok {
				ranges[name] = append(ranges[name], stall{ev.Time().Sub(t0), ev.Time(), 0, ""})
			}
		}
	}
	at := func(t trace.Time) float64 { return float64(t-first) / 1e9 }
	list := func(title string, ss []stall) {
		sort.Slice(ss, func(i, j int) bool { return ss[i].d > ss[j].d })
		var sum time.Duration
		for _, s := range ss {
			sum += s.d
		}
		fmt.Printf("== %s: %d, %v in all\n", title, len(ss), sum.Round(time.Millisecond))
		for i, s := range ss[:min(n, len(ss))] {
			fmt.Printf("%3d %9.2f ms at %7.3f s", i+1, float64(s.d)/1e6, at(s.at))
			if s.g != 0 {
				fmt.Printf(" g%d", s.g)
			}
			if s.stack != "" {
				fmt.Printf("  %s", s.stack)
			}
			fmt.Println()
		}
	}
	list("runnable goroutines waiting for a CPU", sched)
	list("syscalls", syscalls)
	names := make([]string, 0, len(ranges))
	for name := range ranges {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		list(name, ranges[name])
	}
	return nil
}

func stackString(s trace.Stack, frames int) string {
	var b strings.Builder
	i := 0
	for f := range s.Frames() {
		if i == frames {
			break
		}
		if i > 0 {
			b.WriteString(" < ")
		}
		fmt.Fprintf(&b, "%s:%d", f.Func, f.Line)
		i++
	}
	return b.String()
}
