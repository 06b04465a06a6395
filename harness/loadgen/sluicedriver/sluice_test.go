package sluicedriver_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/sluicedriver"
	"github.com/sluicemq/sluice/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The harness smoke for Sluice: a short produce-only workload at a fixed
// rate through the SDK against a whole in-process Sluice; every message is
// acknowledged and latencies are recorded.
func TestSluiceDriverSmoke(t *testing.T) {
	c, err := cluster.New(cluster.Config{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() { stop(); <-done }()

	drv, err := sluicedriver.New(sluicedriver.Config{Addr: c.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	w, err := loadgen.ParseWorkload([]byte("name: t\ntopics: 1\npartitionsPerTopic: 3\nmessageSize: 512\nproducersPerTopic: 1\nproducerRate: 500\nsubscriptionsPerTopic: 0\nwarmupDuration: 1s\ntestDuration: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := loadgen.Run(ctx, loadgen.Options{Driver: drv, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent < 800 || res.Failed != 0 || res.Unacked != 0 || !res.Sustained {
		t.Fatalf("sent %d failed %d unacked %d sustained %v notes %v first error %q", res.Sent, res.Failed, res.Unacked, res.Sustained, res.Notes, res.FirstError)
	}
	if res.PublishLatency.Count == 0 {
		t.Fatalf("no publish latencies: %+v", res.PublishLatency)
	}
	if _, err := drv.NewConsumer(ctx, "no-such-topic", "g", func([]byte) {}); err == nil {
		t.Fatal("consumer of a topic that does not exist")
	}
}
