//go:build integration

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// `sluice copy` outlives a kill -9 of the server under it: sluice dev is
// SIGKILLed while the copy runs and started again on the same directory
// and address; the copy reconnects (its group session, its transactional
// producer) and goes on, and B holds every record of A exactly once.
func TestIntegrationCopySurvivesDevKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin, dir, addr := devFixture(ctx, t)
	api := newDevAPI(addr)
	dev, devOut := startDevServing(ctx, t, api, bin, dir, addr)
	defer func() { _ = dev.Process.Kill(); _ = dev.Wait() }()
	for _, name := range []string{"a", "b"} {
		if _, err := api.admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: 2})); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	produce := func(count int) {
		t.Helper()
		for range count / 50 {
			var recs []*sluicev1.Record
			for range 50 {
				recs = append(recs, &sluicev1.Record{Key: fmt.Appendf(nil, "k%d", n%7), Value: fmt.Appendf(nil, "v%d", n)})
				n++
			}
			if _, err := api.prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "a", Records: recs})); err != nil {
				t.Fatalf("produce: %v\n%s", err, devOut.String())
			}
		}
	}
	produce(2000)

	var copyOut syncBuffer
	cp := exec.Command(bin, "copy", "a", "b", "--addr", addr, "--group", "copiers", "--transactional-id", "cp",
		"--max-poll", "100", "--hold", "20ms", "--progress", "200ms")
	cp.Stdout, cp.Stderr = &copyOut, &copyOut
	if err := cp.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cp.Wait() }()
	defer func() {
		_ = cp.Process.Signal(syscall.SIGTERM)
		<-exited
	}()

	// Kill the server while the copy is in the middle of it.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(copyOut.String(), "holding transaction") {
		if time.Now().After(deadline) {
			t.Fatalf("the copy wrote no transaction in 60s:\n%s", copyOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := dev.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	dev, devOut = startDevServing(ctx, t, api, bin, dir, addr)
	produce(1000)

	// B, read_committed, must come to hold all 3,000 records of A once each.
	var got map[string]int
	deadline = time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("sluice copy exited after the server's kill -9 (%v):\n%s", err, copyOut.String())
		default:
		}
		got = map[string]int{}
		total := 0
		var where []string // each partition: where the read stopped
		for p := range int32(2) {
			next := int64(0)
			for {
				resp, err := api.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "b", Partition: p, Offset: next, MaxRecords: 1000, ReadCommitted: true}))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range resp.Msg.GetRecords() {
					got[string(r.GetValue())]++
					total++
				}
				if resp.Msg.GetNextOffset() == next {
					where = append(where, fmt.Sprintf("partition %d: stopped at %d (high watermark %d, last stable offset %d)",
						p, next, resp.Msg.GetHighWatermark(), resp.Msg.GetLastStableOffset()))
					break
				}
				next = resp.Msg.GetNextOffset()
			}
		}
		if total >= n {
			break
		}
		if time.Now().After(deadline) {
			if d, err := api.admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "b"})); err == nil {
				for _, p := range d.Msg.GetTopic().GetPartitions() {
					where = append(where, fmt.Sprintf("DescribeTopic: partition %d end %d LSO %d", p.GetPartition(), p.GetEndOffset(), p.GetLastStableOffset()))
				}
			}
			t.Logf("server log:\n%s", devOut.String())
			t.Fatalf("B holds %d of %d records after 90s (%s):\n%s", total, n, strings.Join(where, "; "), copyOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range n {
		if c := got[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Errorf("v%d is in B %d times; want once", i, c)
		}
	}
	if len(got) != n {
		t.Errorf("B holds %d distinct values; want %d", len(got), n)
	}
}
