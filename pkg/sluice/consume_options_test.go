package sluice

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Every Reader and Consumer option out of bounds is reported at once, each
// naming its option.
func TestConsumeOptionsValidatedTogether(t *testing.T) {
	c, err := NewClient("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.NewReader("", -1, StartAt(Position{}), WithReadBackoff(0, time.Hour), WithReadRetryTimeout(0),
		WithFetchMaxRecords(0), WithFetchMaxBytes(MaxFetchBytes+1), WithFetchMaxWait(time.Hour))
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("NewReader: %v; want ErrInvalidOption", err)
	}
	for _, name := range []string{"topic", "partition", "StartAt", "WithReadBackoff", "WithReadRetryTimeout",
		"WithFetchMaxRecords", "WithFetchMaxBytes", "WithFetchMaxWait"} {
		if !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	_, err = c.NewConsumer("bad group!", []string{"t", "t"}, StartAt(AtOffset(3)), WithCreditWindow(0, 1),
		WithMaxPollRecords(0), WithAutoCommit(time.Nanosecond), WithSessionTimeout(time.Millisecond),
		WithClientInfo(strings.Repeat("x", MaxClientInfoBytes+1)))
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("NewConsumer: %v; want ErrInvalidOption", err)
	}
	for _, name := range []string{"group", "topics", "StartAt", "WithCreditWindow", "WithMaxPollRecords",
		"WithAutoCommit", "WithSessionTimeout", "WithClientInfo"} {
		if !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	for _, tc := range []struct {
		opts []ConsumerOption
		ok   bool
	}{
		{nil, true},
		{[]ConsumerOption{StartAt(Latest()), WithAutoCommit(0), WithSessionTimeout(0)}, true},
		{[]ConsumerOption{StartAt(AtTime(time.Now()))}, false}, // Subscribe has no start time
		{[]ConsumerOption{WithCreditWindow(1, MinCreditBytes-1)}, false},
	} {
		k, err := c.NewConsumer("g", []string{"t"}, tc.opts...)
		if (err == nil) != tc.ok {
			t.Errorf("%d options: %v; want ok=%v", len(tc.opts), err, tc.ok)
		}
		if k != nil {
			k.cancelRun() // never connected
			<-k.runDone
			<-k.commitDone
		}
	}
}

func TestParsePosition(t *testing.T) {
	ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]Position{
		"earliest": Earliest(), "LATEST": Latest(), "42": AtOffset(42), "0": AtOffset(0),
		"2026-12-01T10:00:00Z": AtTime(ts), "2026-12-01T11:00:00+01:00": AtTime(ts),
	} {
		got, err := ParsePosition(in)
		if err != nil || got.kind != want.kind || got.offset != want.offset || !got.time.Equal(want.time) {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "yesterday", "2026-12-01"} {
		if _, err := ParsePosition(in); err == nil {
			t.Errorf("ParsePosition(%q) succeeded", in)
		}
	}
}
