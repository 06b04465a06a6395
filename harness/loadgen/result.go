package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Units: MiB = 2^20 bytes, GiB = 2^30 bytes (the OpenMessaging Benchmark's
// "MB/s" is MiB/s too; here the unit says so).
const (
	mib = 1 << 20
	gib = 1 << 30
)

// Result is one run of one workload against one driver: what results.json
// holds. Rates and latencies cover the measured window only (after the
// warm-up); see the package doc for how each number is counted.
type Result struct {
	Label          string            `json:"label,omitempty"`
	Driver         string            `json:"driver"`
	DriverSettings map[string]string `json:"driverSettings"`
	Workload       Workload          `json:"workload"`
	Host           Host              `json:"host"`
	Started        time.Time         `json:"started"`

	// TargetRate is the rate the producers were scheduled at during the
	// measured window: the workload's producerRate, or the rate found by
	// the search (RateSearch) when producerRate is 0.
	TargetRate float64      `json:"targetRate"`
	RateSearch []SearchStep `json:"rateSearch,omitempty"`

	WindowSeconds float64    `json:"windowSeconds"`
	Publish       Throughput `json:"publish"` // acknowledgements during the window
	Consume       Throughput `json:"consume"` // deliveries during the window, all subscriptions

	PublishLatency  LatencySummary `json:"publishLatency"`  // intended send to acknowledgement
	EndToEndLatency LatencySummary `json:"endToEndLatency"` // intended send to delivery

	// Counts over the messages intended inside the window.
	Sent        int64 `json:"sent"`        // handed to the driver
	NotSent     int64 `json:"notSent"`     // still unsent when the producers had to stop (behind schedule)
	Failed      int64 `json:"failed"`      // done with an error
	Unacked     int64 `json:"unacked"`     // neither acknowledged nor failed when the drain ended
	NotReceived int64 `json:"notReceived"` // acknowledged × subscriptions, minus received, when the drain ended
	// LagAtEndMs is how far behind schedule the worst producer was when the
	// window ended.
	LagAtEndMs float64 `json:"lagAtEndMs"`
	FirstError string  `json:"firstError,omitempty"`

	// CatchUp is the catch-up test's result (workloads with
	// backlogDuration); nil otherwise.
	CatchUp *CatchUp `json:"catchUp,omitempty"`
	// Recovery is set by runs with a recovery phase (overload tests).
	Recovery *Recovery `json:"recovery,omitempty"`

	CPU  CPUCost `json:"cpu"`
	Cost Cost    `json:"cost"`

	// Sustained is false when the run did not keep up with its target (see
	// Notes): its latencies then measure an overloaded system.
	Sustained bool     `json:"sustained"`
	Notes     []string `json:"notes,omitempty"`
}

// CatchUp is how consumers started behind a backlog caught up, while the
// producers went on at the same rate. Times run from the consumers' start
// (the window's start); see the package doc.
type CatchUp struct {
	// BacklogSeconds is how long the producers ran with no consumer.
	BacklogSeconds float64 `json:"backlogSeconds"`
	// BacklogMessages is the acknowledged messages × subscriptions waiting
	// when the consumers started.
	BacklogMessages int64 `json:"backlogMessages"`
	// SlackMessages is the backlog at or below which the consumers count as
	// caught up.
	SlackMessages int64 `json:"slackMessages"`
	// FirstDeliveryMs is the time from the consumers' start (joining their
	// groups included) to the first delivery.
	FirstDeliveryMs float64 `json:"firstDeliveryMs"`
	// CaughtUp reports that the backlog fell to SlackMessages within the
	// window; CatchUpSeconds is when (or the window's length if not).
	CaughtUp       bool    `json:"caughtUp"`
	CatchUpSeconds float64 `json:"catchUpSeconds"`
	// Delivered is the deliveries from the consumers' start until then.
	Delivered int64 `json:"delivered"`
	// ReadMsgPerSec and ReadMiBPerSec are the consumers' read rate while
	// catching up: Delivered over the time from the first delivery until
	// caught up (group joining left out).
	ReadMsgPerSec float64 `json:"readMsgPerSec"`
	ReadMiBPerSec float64 `json:"readMibPerSec"`
	// ProduceMsgPerSec is the producers' rate meanwhile (all producers).
	ProduceMsgPerSec float64 `json:"produceMsgPerSec"`
	// ReadRatio is ReadMsgPerSec over ProduceMsgPerSec × subscriptions.
	ReadRatio float64 `json:"readRatio"`
}

// Host describes the machine a run ran on.
type Host struct {
	Cores       int    `json:"cores"`
	GoVersion   string `json:"goVersion"`
	Kernel      string `json:"kernel,omitempty"`
	LoadAvgFrom string `json:"loadAvgStart,omitempty"` // /proc/loadavg's 1, 5, 15 minute averages at the start
	LoadAvgTo   string `json:"loadAvgEnd,omitempty"`
}

// Throughput is a message count over the window, and its rates.
type Throughput struct {
	Messages  int64   `json:"messages"`
	MsgPerSec float64 `json:"msgPerSec"`
	MiBPerSec float64 `json:"mibPerSec"`
}

// CPUCost is CPU time used during the measured window.
type CPUCost struct {
	Servers              []ProcessCPU `json:"servers,omitempty"`
	ServerSeconds        float64      `json:"serverSeconds"`
	LoadGeneratorSeconds float64      `json:"loadGeneratorSeconds"`
}

// Cost relates CPU to bytes published in the window. Zero when no server
// pids were given.
type Cost struct {
	// MiBPerServerCore is published MiB/s divided by the server cores busy
	// on average (server CPU seconds / window seconds).
	MiBPerServerCore float64 `json:"mibPerSecPerServerCore"`
	// ServerCPUSecondsPerGiB is server CPU seconds per GiB published.
	ServerCPUSecondsPerGiB float64 `json:"serverCpuSecondsPerGiB"`
	// LoadGeneratorCPUSecondsPerGiB is the load generator's own CPU seconds
	// per GiB published.
	LoadGeneratorCPUSecondsPerGiB float64 `json:"loadGeneratorCpuSecondsPerGiB"`
}

// WriteFiles writes results.json and results.md for rs into dir, creating it.
func WriteFiles(dir string, rs ...*Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	var md strings.Builder
	WriteMarkdown(&md, rs...)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// WriteMarkdown writes rs as two markdown tables, throughput and cost, then
// latency, one row per result, followed by each result's notes.
func WriteMarkdown(w io.Writer, rs ...*Result) {
	if len(rs) == 0 {
		return
	}
	h := rs[0].Host
	fmt.Fprintf(w, "Machine: %d cores, %s, Linux %s; load average %s at the start.  \n",
		h.Cores, h.GoVersion, dash(h.Kernel), dash(h.LoadAvgFrom))
	fmt.Fprintf(w, "MiB = 2^20 bytes. Latencies in ms from the *intended* send time (no coordinated omission); publish = until acknowledged, end to end = until delivered.\n\n")

	fmt.Fprintln(w, "| run | driver | workload | target msg/s | published msg/s | MiB/s | consumed msg/s | server CPU s | MiB/s per server core | server CPU s/GiB | load gen CPU s | sustained |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.0f | %.1f | %.0f | %s | %s | %s | %.1f | %s |\n",
			runLabel(r), r.Driver, r.Workload.Name, r.TargetRate,
			r.Publish.MsgPerSec, r.Publish.MiBPerSec, r.Consume.MsgPerSec,
			cost(r, r.CPU.ServerSeconds, "%.1f"), cost(r, r.Cost.MiBPerServerCore, "%.1f"),
			cost(r, r.Cost.ServerCPUSecondsPerGiB, "%.1f"), r.CPU.LoadGeneratorSeconds, yesNo(r.Sustained))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | publish p50 | p99 | p99.9 | max | end-to-end p50 | p99 | p99.9 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		p, e := r.PublishLatency, r.EndToEndLatency
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", runLabel(r),
			ms(p.Count, p.P50Ms), ms(p.Count, p.P99Ms), ms(p.Count, p.P999Ms), ms(p.Count, p.MaxMs),
			ms(e.Count, e.P50Ms), ms(e.Count, e.P99Ms), ms(e.Count, e.P999Ms), ms(e.Count, e.MaxMs))
	}
	mem := false
	for _, r := range rs {
		for _, sp := range r.CPU.Servers {
			mem = mem || sp.PeakRSSBytes > 0
		}
	}
	if mem {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| run | server process | peak RSS MiB (since start) | RSS MiB at the end |")
		fmt.Fprintln(w, "|---|---|---:|---:|")
		for _, r := range rs {
			for _, sp := range r.CPU.Servers {
				fmt.Fprintf(w, "| %s | %s | %.0f | %.0f |\n", runLabel(r), sp.Name, float64(sp.PeakRSSBytes)/(1<<20), float64(sp.RSSBytes)/(1<<20))
			}
		}
	}
	catchUps := false
	for _, r := range rs {
		catchUps = catchUps || r.CatchUp != nil
	}
	if catchUps {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Catch-up: consumers start behind a backlog while production goes on; the read rate counts from their first delivery until caught up.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| run | backlog s | backlog msgs | first delivery ms | caught up after s | read msg/s | read MiB/s | produce msg/s | read / produce |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range rs {
			c := r.CatchUp
			if c == nil {
				continue
			}
			after := fmt.Sprintf("%.1f", c.CatchUpSeconds)
			if !c.CaughtUp {
				after = fmt.Sprintf("**not within %.0f**", c.CatchUpSeconds)
			}
			fmt.Fprintf(w, "| %s | %.0f | %d | %.0f | %s | %.0f | %.1f | %.0f | %.2f× |\n", runLabel(r),
				c.BacklogSeconds, c.BacklogMessages, c.FirstDeliveryMs, after, c.ReadMsgPerSec, c.ReadMiBPerSec, c.ProduceMsgPerSec, c.ReadRatio)
		}
	}
	recs := false
	for _, r := range rs {
		recs = recs || r.Recovery != nil
	}
	if recs {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Recovery: after the window the producers drop their unsent backlog and go on at the recovery rate; recovered = the first whole second whose messages were all acknowledged within the bound.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| run | recovery msg/s | bound ms | recovered after s | sent | acked | failed |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, r := range rs {
			c := r.Recovery
			if c == nil {
				continue
			}
			after := fmt.Sprintf("%.1f", c.Seconds)
			if !c.Recovered {
				after = fmt.Sprintf("**not within %.0f**", c.Seconds)
			}
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %d | %d | %d |\n", runLabel(r), c.Rate, c.LatencyBoundMs, after, c.Sent, c.Acked, c.Failed)
		}
	}
	for _, r := range rs {
		if len(r.Notes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nNotes on %s:\n", runLabel(r))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func runLabel(r *Result) string {
	if r.Label != "" {
		return r.Label
	}
	return r.Driver + " " + r.Workload.Name
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// cost formats a CPU-derived value, or "-" when no server pids were given
// (a zero there would read as "free").
func cost(r *Result, v float64, format string) string {
	if len(r.CPU.Servers) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func ms(count int64, v float64) string {
	if count == 0 {
		return "-"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
