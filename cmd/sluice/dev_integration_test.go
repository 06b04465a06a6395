//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

// `sluice dev` survives kill -9: every record acknowledged before the kill
// is in the ledgers after a restart on the same data directory, in order,
// and producing continues at the next offset.
func TestIntegrationDevSurvivesKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, dir, addr := devFixture(ctx, t)
	startDev := func() (*exec.Cmd, *bytes.Buffer) {
		var out bytes.Buffer
		cmd := exec.Command(bin, "dev", "--data-dir", dir, "--addr", addr)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				return cmd, &out
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("sluice dev not listening after 30s:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	admin := sluicev1connect.NewAdminServiceClient(hc, "http://"+addr, connect.WithGRPC())
	prod := sluicev1connect.NewProducerServiceClient(hc, "http://"+addr, connect.WithGRPC())

	cmd, out := startDev()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "k9", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	produce := func(i int) (*sluicev1.ProduceResult, error) {
		part := int32(i % 2)
		resp, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "k9", Partition: &part,
			Records: []*sluicev1.Record{{Value: fmt.Appendf(nil, "record %d", i)}}}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetResults()[0], nil
	}
	acked := map[int32][]string{}
	for i := 0; i < 200; i++ {
		var r *sluicev1.ProduceResult
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for {
			r, err = produce(i)
			if err == nil || connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // the writer is still registering
		}
		if err != nil {
			t.Fatalf("produce %d: %v\n%s", i, err, out.String())
		}
		if r.GetOffset() != int64(len(acked[r.GetPartition()])) {
			t.Fatalf("record %d at %d/%d", i, r.GetPartition(), r.GetOffset())
		}
		acked[r.GetPartition()] = append(acked[r.GetPartition()], fmt.Sprintf("record %d", i))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	cmd, out = startDev()
	var r *sluicev1.ProduceResult
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err = produce(0)
		if err == nil || connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("produce after restart: %v\n%s", err, out.String())
	}
	if r.GetOffset() != int64(len(acked[0])) {
		t.Fatalf("first offset after the restart %d; want %d", r.GetOffset(), len(acked[0]))
	}
	acked[0] = append(acked[0], "record 0")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()

	// Read the ledgers back with the same code, in-process, on the data dir.
	c, err := cluster.New(cluster.Config{Dir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() { stop(); <-done }()
	for part, want := range acked {
		pt, err := c.Catalog.GetPartition(ctx, "k9", int(part))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ref := range pt.Ledgers {
			// A ledger the killed process left open is recovered (fenced
			// and closed), as the partition's next writer would.
			m, err := c.Ledgers.Recover(ctx, ref.ID, func(_ int64, payload []byte) (int64, error) {
				last := int64(-1)
				for rest := payload; len(rest) > 0; {
					b, r, err := record.Split(rest)
					if err != nil {
						return 0, err
					}
					last, rest = b.LastOffset(), r
				}
				return last, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if m.LastEntry < 0 {
				continue
			}
			ents, err := c.Ledgers.ReadEntries(ctx, ref.ID, 0, m.LastEntry)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				for rest := e; len(rest) > 0; {
					b, r, err := record.Split(rest)
					if err != nil {
						t.Fatal(err)
					}
					recs, err := record.Decode(b, record.DefaultLimits())
					if err != nil {
						t.Fatal(err)
					}
					for _, rec := range recs {
						got = append(got, string(rec.Value))
					}
					rest = r
				}
			}
		}
		if len(got) < len(want) {
			t.Fatalf("partition %d holds %d records; %d were acknowledged", part, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("partition %d offset %d holds %q; %q was acknowledged there", part, i, got[i], want[i])
			}
		}
	}
}
