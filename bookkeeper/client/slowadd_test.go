package client

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSlowAddLog(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_000, 0)
	c := &Client{cfg: Config{SlowAdd: 50 * time.Millisecond, Now: func() time.Time { return now }},
		log: slog.New(slog.NewTextHandler(&buf, nil))}
	add := func(took time.Duration, acks ...bookieTime) {
		c.slow.note(c, 7, &waitingAppend{entry: 3, start: now.Add(-took), acks: acks})
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	add(10 * time.Millisecond)
	if buf.Len() != 0 {
		t.Fatalf("a fast add was logged: %s", buf.String())
	}
	add(80*time.Millisecond, bookieTime{bookie: "b1", after: 2 * time.Millisecond}, bookieTime{bookie: "b3", after: 79 * time.Millisecond, failed: true})
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], `bookies="b1 2ms, b3 79ms (failed)"`) ||
		!strings.Contains(got[0], "ledger=7") || !strings.Contains(got[0], "acknowledged_after=80ms") {
		t.Fatalf("slow add line: %q", got)
	}
	add(90 * time.Millisecond) // within the second: counted, not logged
	now = now.Add(1100 * time.Millisecond)
	add(200 * time.Millisecond)
	got := lines()
	if len(got) != 2 || !strings.Contains(got[1], "other_slow_adds=1") || !strings.Contains(got[1], `bookies="none answered"`) {
		t.Fatalf("second line: %q", got)
	}
}
