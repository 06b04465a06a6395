package lambdapool

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestInstanceEnv(t *testing.T) {
	base := []string{"PATH=/bin", "AWS_LAMBDA_MAX_CONCURRENCY=8", "AWS_REGION=eu-west-1", "HOME=/root", "X=pool"}
	fn := Function{Name: "f", Timeout: 30 * time.Second, Env: []string{"X=fn", "Y=1"}}
	got := instanceEnv(base, fn, "us-east-1", "m1")
	want := []string{"PATH=/bin", "HOME=/root", "X=pool",
		"AWS_LAMBDA_FUNCTION_NAME=f", "AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_REGION=us-east-1", envInstance + "=m1",
		"X=fn", "Y=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("instanceEnv =\n%q\nwant\n%q", got, want)
	}
}

func TestLineLogger(t *testing.T) {
	var buf bytes.Buffer
	l := &lineLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		},
	}))}
	l.Write([]byte("one\ntw"))
	l.Write([]byte("o\r\n\nthree"))
	l.Write([]byte(strings.Repeat("x", maxLineBytes+5)))
	l.flush()
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"line=one", "line=two", "line=three" + strings.Repeat("x", maxLineBytes-5), "line=xxxxxxxxxx"}
	if !slices.Equal(got, want) {
		t.Fatalf("logged %d lines:\n%.200q\nwant\n%.200q", len(got), got, want)
	}
}

func TestPortSetNeverHandsOutAHeldPort(t *testing.T) {
	s := newPortSet()
	a, err := s.reserve(2)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{a[0]: true, a[1]: true}
	if len(seen) != 2 {
		t.Fatalf("reserve(2) = %v", a)
	}
	for range 50 {
		b, err := s.reserve(2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range b {
			if p == a[0] || p == a[1] {
				t.Fatalf("port %d handed out twice", p)
			}
		}
		s.release(b)
	}
}
