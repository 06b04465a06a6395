package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a cluster on dir until the test ends (or stop is called).
func start(t *testing.T, dir string) (c *Cluster, stop func()) {
	t.Helper()
	c, err := New(Config{Dir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func clients(c *Cluster, opts ...connect.ClientOption) (sluicev1connect.AdminServiceClient, sluicev1connect.ProducerServiceClient) {
	url := "http://" + c.Addr()
	return sluicev1connect.NewAdminServiceClient(h2c, url, opts...), sluicev1connect.NewProducerServiceClient(h2c, url, opts...)
}

// Produce end to end: a topic is created, records go in over gRPC and
// Connect JSON (curl's way), offsets are dense per partition and returned in
// request order, the stored ledgers hold exactly those records, and after a
// restart on the same directory the next produce continues after them.
func TestProduceEndToEnd(t *testing.T) {
	dir := t.TempDir()
	c, stop := start(t, dir)
	admin, prod := clients(c, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "orders", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	var recs []*sluicev1.Record
	for i := range 5 {
		recs = append(recs, &sluicev1.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	resp, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: &p0, Records: recs}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Msg.GetResults() {
		if r.GetPartition() != 0 || r.GetOffset() != int64(i) {
			t.Fatalf("result %d = %v", i, r)
		}
	}

	// Connect JSON over HTTP/1.1, as curl sends it.
	body := `{"topic":"orders","partition":0,"records":[{"key":"` + b64("k") + `","value":"` + b64("json") + `"}]}`
	hresp, err := http.Post("http://"+c.Addr()+"/sluice.v1.ProducerService/Produce", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	var jr struct {
		Results []struct {
			Partition int    `json:"partition"`
			Offset    string `json:"offset"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &jr); err != nil || hresp.StatusCode != 200 || len(jr.Results) != 1 || jr.Results[0].Offset != "5" {
		t.Fatalf("JSON produce: %d %s (%v)", hresp.StatusCode, raw, err)
	}

	// Bad input names the field.
	_, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: ptr(int32(7)), Records: recs}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "partition") {
		t.Fatalf("bad partition: %v", err)
	}
	_, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "nope", Records: recs}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown topic: %v", err)
	}

	desc, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "orders"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.Msg.GetTopic().GetPartitions()[0]; p.GetOwner() != "ingest-1" || p.GetEndOffset() != 6 {
		t.Fatalf("partition 0 described as %v", p)
	}

	stop()
	c, _ = start(t, dir)
	_, prod = clients(c, connect.WithGRPC())
	resp, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: &p0, Records: recs[:1]}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.GetResults()[0].GetOffset(); got != 6 {
		t.Fatalf("first offset after restart = %d; want 6", got)
	}

	// The ledgers of partition 0 hold offsets 0..6 in order.
	part, err := c.Catalog.GetPartition(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for _, ref := range part.Ledgers {
		m, err := c.Catalog.GetLedger(ctx, ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := m.LastEntry
		if !m.State.Sealed() {
			r, err := c.Ledgers.OpenReader(ctx, ref.ID)
			if err != nil {
				t.Fatal(err)
			}
			if last, err = r.WaitLAC(ctx, -1); err != nil {
				t.Fatal(err)
			}
		}
		if last < 0 {
			continue
		}
		ents, err := c.Ledgers.ReadEntries(ctx, ref.ID, 0, last)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for rest := e; len(rest) > 0; {
				b, r, err := record.Split(rest)
				if err != nil {
					t.Fatal(err)
				}
				if b.BaseOffset() != next {
					t.Fatalf("ledger %d: batch at %d; want %d", ref.ID, b.BaseOffset(), next)
				}
				next, rest = b.NextOffset(), r
			}
		}
	}
	if next != 7 {
		t.Fatalf("ledgers hold offsets up to %d; want 7", next)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func ptr[T any](v T) *T { return &v }
