package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The same warning passes RepeatBurst times a window; the next one after
// the window says how many were dropped. Other messages, and info and
// debug lines, are not held back.
func TestRepeatedLinesAreLimited(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1_800_000_000, 0)
	h := newRepeatLimiter(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), func() time.Time { return now })
	log := slog.New(h).With("service", "ingest")
	for i := range 100 {
		log.Warn("ensemble change failed", "ledger", i)
		log.Debug("retrying", "ledger", i)
		log.Info("an event", "ledger", i)
	}
	log.Warn("something else")
	count := func(s string) int { return strings.Count(out.String(), s) }
	if n := count("msg=\"ensemble change failed\""); n != RepeatBurst {
		t.Fatalf("%d warnings passed; want %d:\n%s", n, RepeatBurst, out.String())
	}
	if count("msg=retrying") != 100 || count("msg=\"an event\"") != 100 || count("something else") != 1 {
		t.Fatalf("debug lines or another message held back:\n%s", out.String())
	}
	out.Reset()
	now = now.Add(RepeatWindow)
	log.Warn("ensemble change failed", "ledger", 100)
	got := out.String()
	if !strings.Contains(got, "dropped 90 more such lines in the 1m0s before this one") || !strings.Contains(got, "dropped=90") ||
		!strings.Contains(got, "ledger=100") || strings.Count(got, "\n") != 2 {
		t.Fatalf("after the window:\n%s\nwant the summary of 90 dropped lines, then the line", got)
	}
	if err := h.Handle(context.Background(), slog.NewRecord(now, slog.LevelError, "x", 0)); err != nil {
		t.Fatal(err)
	}
}
