//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicemq/sluice/harness/bookieproc"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// Acknowledged means readable, at once, after a kill -9 (docs/DESIGN.md,
// "Acknowledged means readable"): records are produced to every partition
// of a topic, sluice dev is killed with SIGKILL and started again on the
// same data directory, and as soon as health answers SERVING each
// partition is read to its end once — no sleeps, no waiting fetches. Every
// acknowledged record is there, in order, and no high watermark is lower
// than one seen before the kill. Run several times: the last produce call
// before the kill is the one whose LAC no bookie knew.
func TestIntegrationDevReadToEndAfterKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin, dir, addr := devFixture(ctx, t)
	api := newDevAPI(addr)
	admin, prod, cons := api.admin, api.prod, api.cons
	startDev := func() (*exec.Cmd, *bytes.Buffer) { return startDevServing(ctx, t, api, bin, dir, addr) }
	kill := func(cmd *exec.Cmd) {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}

	const parts = 4
	acked := map[int32][]string{}
	seenHW := map[int32]int64{}
	// readToEnd reads every partition from 0 to the high watermark of its
	// last answer, with maxWaitMs 0, and checks it against acked and seenHW.
	readToEnd := func(round int, out *bytes.Buffer) {
		for part := range int32(parts) {
			var got []string
			next, hw := int64(0), int64(-1)
			for {
				resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "rk", Partition: part, Offset: next, MaxRecords: 1000}))
				if err != nil {
					t.Fatalf("round %d: fetch %d@%d: %v\n%s", round, part, next, err, out.String())
				}
				hw = resp.Msg.GetHighWatermark()
				if hw < seenHW[part] {
					t.Fatalf("round %d: partition %d high watermark %d after the restart; %d was seen before", round, part, hw, seenHW[part])
				}
				seenHW[part] = hw
				for _, r := range resp.Msg.GetRecords() {
					got = append(got, string(r.GetValue()))
				}
				if len(resp.Msg.GetRecords()) == 0 || resp.Msg.GetNextOffset() >= hw {
					break
				}
				next = resp.Msg.GetNextOffset()
			}
			want := acked[part]
			if len(got) < len(want) || hw < int64(len(want)) {
				t.Fatalf("round %d: partition %d read %d records to high watermark %d right after the restart; %d were acknowledged\n%s", round, part, len(got), hw, len(want), out.String())
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("round %d: partition %d offset %d holds %q; %q was acknowledged there", round, part, i, got[i], want[i])
				}
			}
		}
	}

	cmd, out := startDev()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "rk", Partitions: parts})); err != nil {
		t.Fatal(err)
	}
	n := 0
	for round := range 3 {
		// Produce calls of a few records each to every partition; the
		// last one of each partition is acknowledged right before the kill.
		for call := range 5 {
			for part := range int32(parts) {
				var recs []*sluicev1.Record
				for range 1 + call%3 {
					recs = append(recs, &sluicev1.Record{Value: fmt.Appendf(nil, "r%d", n)})
					n++
				}
				resp, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "rk", Partition: &part, Records: recs}))
				if err != nil {
					t.Fatalf("round %d: produce to %d: %v\n%s", round, part, err, out.String())
				}
				for i, r := range resp.Msg.GetResults() {
					if r.GetPartition() != part || r.GetOffset() != int64(len(acked[part])) {
						t.Fatalf("round %d: record acknowledged at %d/%d; want %d/%d", round, r.GetPartition(), r.GetOffset(), part, len(acked[part]))
					}
					acked[part] = append(acked[part], string(recs[i].GetValue()))
				}
			}
		}
		// A high watermark seen before the kill must not be lost either.
		for part := range int32(parts) {
			resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "rk", Partition: part, Offset: 0, MaxRecords: 1}))
			if err != nil {
				t.Fatal(err)
			}
			seenHW[part] = max(seenHW[part], resp.Msg.GetHighWatermark())
		}
		kill(cmd)
		cmd, out = startDev()
		readToEnd(round, out)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// devAPI are the public API clients of a sluice dev, over gRPC.
type devAPI struct {
	admin  sluicev1connect.AdminServiceClient
	prod   sluicev1connect.ProducerServiceClient
	cons   sluicev1connect.ConsumerServiceClient
	health *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]
}

func newDevAPI(addr string) devAPI {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	base := "http://" + addr
	return devAPI{
		admin:  sluicev1connect.NewAdminServiceClient(hc, base, connect.WithGRPC()),
		prod:   sluicev1connect.NewProducerServiceClient(hc, base, connect.WithGRPC()),
		cons:   sluicev1connect.NewConsumerServiceClient(hc, base, connect.WithGRPC()),
		health: connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, base+"/grpc.health.v1.Health/Check", connect.WithGRPC()),
	}
}

// devFixture builds the sluice binary and picks a data directory and a
// free address for the test's sluice dev.
func devFixture(ctx context.Context, t *testing.T) (bin, dir, addr string) {
	t.Helper()
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err = bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return bin, t.TempDir(), addr
}

// startDevServing starts sluice dev on dir and addr and returns once its
// health answers SERVING (its output goes to the buffer).
func startDevServing(ctx context.Context, t *testing.T, api devAPI, bin, dir, addr string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, "dev", "--data-dir", dir, "--addr", addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := api.health.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
		if err == nil && resp.Msg.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return cmd, &out
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("sluice dev not SERVING after 60s (last: %v):\n%s", err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
