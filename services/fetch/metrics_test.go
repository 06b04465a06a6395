package fetch_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/internal/telemetry/metrictest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// The read path's metrics move with what it does: records and bytes
// delivered by topic (Fetch and sessions), a delivery age per delivery,
// the open sessions, leases acquired by group, and the group's lag —
// what is written and not committed — falling to zero once the member
// commits.
func TestMetricsCountTheReadPath(t *testing.T) {
	mr := metrictest.New(t)
	tel := telemetry.Discard()
	tel.MeterProvider = mr.Provider
	cfg := groupConfig()
	cfg.Telemetry = tel
	cfg.Fetch.LagInterval = 20 * time.Millisecond
	e := startCluster(t, cfg)
	const parts, per = 2, 25
	e.createTopic(t, "m", parts)
	for p := range int32(parts) {
		e.produce(t, "m", p, 0, per, per)
	}
	topic := attribute.String("topic", "m")

	// Fetch: one delivery of the partition's records.
	resp, err := e.cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: "m", Partition: 0, Start: sluicev1.StartPosition_START_POSITION_EARLIEST}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Msg.GetRecords()); n != per {
		t.Fatalf("Fetch returned %d records, want %d", n, per)
	}
	if got := mr.Value("sluice.fetch.records", topic); got != per {
		t.Fatalf("records{topic=m} after one Fetch = %v, want %d", got, per)
	}
	if got := mr.Count("sluice.fetch.delivery.age", attribute.String("via", "fetch")); got != 1 {
		t.Fatalf("delivery age samples via fetch = %d, want 1", got)
	}
	if got := mr.Value("sluice.fetch.sessions"); got != 0 {
		t.Fatalf("sessions before any Subscribe = %v", got)
	}

	// A session: both partitions leased and delivered; the lag is what
	// the group has not committed (all of it, before a commit).
	credits := &sluicev1.Credits{Records: 1_000_000, Bytes: 1 << 40}
	a := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "mg", Topics: []string{"m"}, Credits: credits}, true)
	waitFor(t, "the member to hold both partitions and read everything", 10*time.Second, func() bool { return a.held() == parts && a.count() == parts*per })
	if got := mr.Value("sluice.fetch.sessions"); got != 1 {
		t.Fatalf("sessions = %v, want 1", got)
	}
	if got := mr.Value("sluice.fetch.group.lease.acquisitions", attribute.String("group", "mg")); got != parts {
		t.Fatalf("lease acquisitions{group=mg} = %v, want %d", got, parts)
	}
	if got := mr.Value("sluice.fetch.records", topic); got != per+parts*per {
		t.Fatalf("records{topic=m} = %v, want %d (one Fetch, then the session)", got, per+parts*per)
	}
	if p, ok := mr.Find("sluice.fetch.delivery.age", attribute.String("via", "subscribe")); !ok || p.Count == 0 {
		t.Fatalf("no delivery age sample via subscribe: %+v", p)
	}
	lag := func() float64 {
		p, _ := mr.Find("sluice.fetch.group.lag", attribute.String("group", "mg"), topic)
		return p.Value
	}
	waitFor(t, "the lag of everything uncommitted", 5*time.Second, func() bool { return lag() == parts*per })
	if err := a.commitAll(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no lag once committed", 5*time.Second, func() bool { return lag() == 0 })
	e.produce(t, "m", 1, per, 7, 7)
	waitFor(t, "the new records delivered", 5*time.Second, func() bool { return a.count() == parts*per+7 })
	waitFor(t, "the lag of the records not committed", 5*time.Second, func() bool { return lag() == 7 })
	if bytes := mr.Value("sluice.fetch.bytes", topic); bytes <= 0 {
		t.Fatalf("bytes{topic=m} = %v", bytes)
	}
}
