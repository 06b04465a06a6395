package ingest

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/internal/telemetry/metrictest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// The write path's metrics move with what it does: acknowledged records
// and bytes by topic, one latency sample per acknowledged request, refused
// requests by code, a quota's delays, the partitions taken and held, the
// buffer drained once every request is answered.
func TestMetricsCountTheWritePath(t *testing.T) {
	f := newFixture(t, 2)
	mr := metrictest.New(t)
	f.meters = mr.Provider
	s := f.copyOf("a", func(c *Config) {
		c.Quota = quota.Config{Default: quota.Quota{BytesPerSecond: 2000, Burst: 1}}
	})
	topic := attribute.String("topic", "t")

	// Before any request: the counters an alert rates exist at zero.
	if v := mr.Value(metricThrottled); v != 0 {
		t.Fatalf("throttled before any request = %v", v)
	}
	if v := mr.Value(metricAcquisitions, attribute.String("outcome", "ok")); v != 0 {
		t.Fatalf("acquisitions before any request = %v", v)
	}

	for p := range 2 {
		p32 := int32(p)
		req := connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p32,
			Records: []*sluicev1.Record{{Value: []byte("one")}, {Value: []byte("two")}, {Value: []byte("three")}}})
		resp, err := s.Produce(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetThrottleTimeMs() <= 0 {
			t.Fatalf("a quota with a 1-byte burst did not throttle: %v", resp.Msg)
		}
	}
	if _, err := s.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a request without records: %v", err)
	}
	if _, err := s.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: "nope", Records: []*sluicev1.Record{{Value: []byte("x")}}})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("a request to a missing topic: %v", err)
	}

	if got := mr.Value(metricRecords, topic); got != 6 {
		t.Errorf("records{topic=t} = %v, want 6", got)
	}
	batchBytes := int64(mr.Value(metricBytes, topic))
	if batchBytes <= int64(len("onetwothree")*2) {
		t.Errorf("bytes{topic=t} = %d: less than the values alone", batchBytes)
	}
	if got := mr.Count(metricProduceTime); got != 2 {
		t.Errorf("produce duration samples = %d, want 2 (one per acknowledged request)", got)
	}
	if got := mr.Value(metricProduceErrors, attribute.String("code", "invalid_argument")); got != 1 {
		t.Errorf("produce errors{code=invalid_argument} = %v, want 1", got)
	}
	if got := mr.Value(metricProduceErrors, attribute.String("code", "not_found")); got != 1 {
		t.Errorf("produce errors{code=not_found} = %v, want 1", got)
	}
	if got := mr.Value(metricThrottled); got != 2 {
		t.Errorf("throttled = %v, want 2", got)
	}
	if got := mr.Value(metricThrottleTime); got <= 0 {
		t.Errorf("throttle time = %v, want > 0", got)
	}
	if got := mr.Value(metricAcquisitions, attribute.String("outcome", "ok")); got != 2 {
		t.Errorf("acquisitions{outcome=ok} = %v, want 2", got)
	}
	if got := mr.Value(metricOwned); got != 2 {
		t.Errorf("partitions owned = %v, want 2", got)
	}
	if got := mr.Value(metricBuffered); got != 0 {
		t.Errorf("buffered = %v after every answer, want 0", got)
	}
	if got := mr.Value(metricBufferLimit); got != float64(s.cfg.MaxBufferedBytes) {
		t.Errorf("buffer limit = %v, want %d", got, s.cfg.MaxBufferedBytes)
	}

	// A forwarded request is counted by the copy the producer called, not
	// again by the owner.
	p0 := int32(0)
	fwd := connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p0, Records: []*sluicev1.Record{{Value: []byte("f")}}})
	fwd.Header().Set(forwardedHeader, "1")
	if _, err := s.Produce(context.Background(), fwd); err != nil {
		t.Fatal(err)
	}
	if got := mr.Value(metricRecords, topic); got != 6 {
		t.Errorf("records{topic=t} = %v after a forwarded request, want 6 still", got)
	}
}
