//go:build chaos_clock

package main

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// chaosClockEnv names a file holding this process's clock offset as a Go
// duration ("3s", "-5s", "0s"); the chaos harness rewrites it to skew a
// running process, as an NTP step would. Chaos builds only.
const chaosClockEnv = "SLUICE_CHAOS_CLOCK_FILE"

func init() {
	path := os.Getenv(chaosClockEnv)
	if path == "" {
		return
	}
	var offset atomic.Int64
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return // not written yet, or being replaced: keep the last offset
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos build: %s: %v\n", chaosClockEnv, err)
			return
		}
		offset.Store(int64(d))
	}
	read()
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			read()
		}
	}()
	// Round(0) drops the monotonic reading: a skewed time is a wall time,
	// as one read from another process's stored record is.
	wallNow = func() time.Time { return time.Now().Round(0).Add(time.Duration(offset.Load())) }
	fmt.Fprintf(os.Stderr, "chaos build: the wall clock is offset by the duration in %s (build tag chaos_clock)\n", path)
}
