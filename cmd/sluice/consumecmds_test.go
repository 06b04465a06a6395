package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/sluice"
)

func TestConsumeFlags(t *testing.T) {
	f, err := parseConsume([]string{"--group", "g", "orders", "--follow", "--from", "latest", "--count", "5", "--format", "json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.topic != "orders" || f.group != "g" || !f.follow || f.count != 5 || f.format != "json" || f.from != sluice.Latest() || f.partition != -1 || f.addr != devDefaultAddr {
		t.Fatalf("%+v", f)
	}
	f, err = parseConsume([]string{"orders", "--partition", "2", "--from", "2026-12-01T10:00:00Z"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.partition != 2 || f.from != sluice.AtTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) || f.follow || f.format != "text" {
		t.Fatalf("%+v", f)
	}
	if f, err = parseConsume([]string{"--from", "42", "t"}, io.Discard); err != nil || f.from != sluice.AtOffset(42) {
		t.Fatalf("%+v, %v", f, err)
	}

	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{nil, "sluice consume TOPIC"},
		{[]string{"a", "b"}, "one topic at a time"},
		{[]string{"t", "--from", "yesterday"}, "--from"},
		{[]string{"t", "--from", "-3"}, "--from"},
		{[]string{"t", "--format", "xml"}, "--format"},
		{[]string{"t", "--count", "-1"}, "--count"},
		{[]string{"t", "--partition", "-2"}, "--partition"},
		{[]string{"t", "--group", "g", "--partition", "1"}, "drop one of them"},
		{[]string{"t", "--group", "g", "--from", "42"}, "sluice group reset g --topic t --to 42"},
		{[]string{"t", "--idle", "0s"}, "--idle"},
		{[]string{"t", "--group", "g", "--commit-interval", "0s"}, "--commit-interval"},
		{[]string{"t", "--group", "g", "--session-timeout", "-1s"}, "--session-timeout"},
		{[]string{"t", "--nope"}, "flag provided but not defined"},
	} {
		_, err := parseConsume(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	var help bytes.Buffer
	if _, err := parseConsume([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "Usage: sluice consume") {
		t.Fatalf("-h: %v\n%s", err, help.String())
	}
	if err := runConsume(context.Background(), []string{"--help"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("--help: %v", err)
	}
}

func TestGroupResetFlags(t *testing.T) {
	r, err := parseReset("t", "earliest", "0, 2")
	if err != nil || r.to != sluice.Earliest() || len(r.partitions) != 2 || r.partitions[1] != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, tc := range [][3]string{
		{"", "earliest", ""}, {"t", "", ""}, {"t", "soon", ""}, {"t", "latest", "x"}, {"t", "latest", "-1"},
	} {
		if _, err := parseReset(tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("parseReset%q succeeded", tc)
		}
	}
	var stderr bytes.Buffer
	if err := runGroup(context.Background(), nil, io.Discard, &stderr); err != nil || !strings.Contains(stderr.String(), "sluice group reset GROUP") {
		t.Fatalf("usage: %v\n%s", err, stderr.String())
	}
	if err := runGroup(context.Background(), []string{"describe"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "one group name") {
		t.Fatalf("describe without a name: %v", err)
	}
	if err := runGroup(context.Background(), []string{"frobnicate"}, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown verb accepted")
	}
}

func TestRecordPrinter(t *testing.T) {
	var out bytes.Buffer
	p := &recordPrinter{w: &out, limit: 2}
	ts := time.UnixMilli(1_700_000_000_000)
	r := sluice.ConsumedRecord{Topic: "t", Partition: 1, Offset: 7, Key: []byte("k"), Value: []byte("a\tb"), Timestamp: ts}
	if ok, more := p.print(&r); !ok || !more {
		t.Fatal("first record not printed")
	}
	r.Key, r.Value = nil, []byte("plain value")
	if ok, more := p.print(&r); !ok || more {
		t.Fatal("second record: want printed, no more")
	}
	if ok, _ := p.print(&r); ok {
		t.Fatal("printed past --count")
	}
	if want := "1\t7\tk\t\"a\\tb\"\n1\t7\t\tplain value\n"; out.String() != want {
		t.Fatalf("text output %q; want %q", out.String(), want)
	}

	out.Reset()
	p = &recordPrinter{w: &out, json: true}
	r = sluice.ConsumedRecord{Topic: "t", Offset: 3, Key: []byte{0xff}, Value: []byte("v"), Timestamp: ts,
		Headers: []sluice.Header{{Key: "h", Value: []byte("x")}}}
	p.print(&r)
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["key_base64"] != "/w==" || m["value"] != "v" || m["offset"] != float64(3) || m["timestamp"] != "2023-11-14T22:13:20Z" {
		t.Fatalf("json %s", out.String())
	}
}
