package sluicedriver_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hamba/avro/v2"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/sluicedriver"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/schema"
)

// schemaWorkload is csmoke's shape (one group reading as it goes) at 1 KiB,
// shorter.
const schemaWorkload = "name: schema\ntopics: 1\npartitionsPerTopic: 3\nmessageSize: 1024\nproducersPerTopic: 1\nproducerRate: 300\n" +
	"subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nwarmupDuration: 1s\ntestDuration: 2s\n"

// schemaRun runs schemaWorkload through a driver with cfg, keeps its topic,
// and returns the result, the topic's description and its records (the
// first fetch of every partition).
type schemaRun struct {
	res     *loadgen.Result
	topic   *sluicev1.TopicInfo
	values  [][]byte
	admin   sluicev1connect.AdminServiceClient
	produce sluicev1connect.ProducerServiceClient
	schemas sluicev1connect.SchemaServiceClient
}

func runSchemaWorkload(t *testing.T, schemaOpt string) *schemaRun {
	t.Helper()
	c := startCluster(t)
	drv := newDriver(t, sluicedriver.Config{Addr: c.Addr(), Schema: schemaOpt})
	w, err := loadgen.ParseWorkload([]byte(schemaWorkload))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Options{Driver: drv, Workload: w, KeepTopics: true, DrainTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Every message acknowledged (the server validated it) and delivered
	// once with its header intact (the consumer took the frame off).
	if res.Failed+res.Unacked+res.NotSent+res.NotReceived != 0 || res.FirstError != "" {
		t.Fatalf("failed %d unacked %d not sent %d not received %d (%s)",
			res.Failed, res.Unacked, res.NotSent, res.NotReceived, res.FirstError)
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "not written by this run") {
			t.Fatalf("the consumer delivered values that are not the load generator's: %s", n)
		}
	}
	if res.Sent == 0 || res.EndToEndLatency.Count != res.Sent {
		t.Fatalf("%d end-to-end latencies for %d messages sent in the window: want each delivered once", res.EndToEndLatency.Count, res.Sent)
	}

	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	t.Cleanup(hc.CloseIdleConnections)
	base := "http://" + c.Addr()
	r := &schemaRun{res: res,
		admin:   sluicev1connect.NewAdminServiceClient(hc, base, connect.WithGRPC()),
		produce: sluicev1connect.NewProducerServiceClient(hc, base, connect.WithGRPC()),
		schemas: sluicev1connect.NewSchemaServiceClient(hc, base, connect.WithGRPC()),
	}
	cons := sluicev1connect.NewConsumerServiceClient(hc, base, connect.WithGRPC())
	lt, err := r.admin.ListTopics(ctx, connect.NewRequest(&sluicev1.ListTopicsRequest{}))
	if err != nil || len(lt.Msg.GetTopics()) != 1 {
		t.Fatalf("ListTopics: %v; want the run's one topic, got %v", err, lt)
	}
	dt, err := r.admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: lt.Msg.GetTopics()[0].GetName()}))
	if err != nil {
		t.Fatal(err)
	}
	r.topic = dt.Msg.GetTopic()
	for p := range int32(w.PartitionsPerTopic) {
		f, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: r.topic.GetName(), Partition: p}))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range f.Msg.GetRecords() {
			r.values = append(r.values, rec.GetValue())
		}
	}
	if len(r.values) == 0 {
		t.Fatal("no records fetched")
	}
	return r
}

// With Schema avro, the driver registers the values' schema under
// <topic>-value, creates the topic with schema.subject, and every value it
// sends passes the server's validation at produce: a framed datum of the
// schema, 1,024 bytes in all, whose data is the load generator's payload
// (header first). The topic really validates: an unframed value is refused.
func TestSchemaAvroValuesPassValidation(t *testing.T) {
	r := runSchemaWorkload(t, sluicedriver.SchemaAvro)
	subject := sluicedriver.SubjectOf(r.topic.GetName())
	if got := r.topic.GetConfig()["schema.subject"]; got != subject {
		t.Fatalf("topic config schema.subject = %q; want %q", got, subject)
	}
	if got := r.res.DriverSettings["client.schema"]; !strings.Contains(got, subject) {
		t.Errorf("driver settings client.schema = %q; want it to name %s", got, subject)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := r.schemas.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: subject}))
	if err != nil {
		t.Fatal(err)
	}
	id := v.Msg.GetVersion().GetSchema().GetId()
	sch := avro.MustParse(sluicedriver.AvroSchema)
	for i, val := range r.values {
		if len(val) != 1024 {
			t.Fatalf("value %d is %d bytes; want 1024", i, len(val))
		}
		gotID, payload, err := schema.ParseWire(val)
		if err != nil || gotID != id {
			t.Fatalf("value %d: schema id %d, %v; want id %d", i, gotID, err, id)
		}
		var d struct {
			Data []byte `avro:"data"`
		}
		if err := avro.Unmarshal(sch, payload, &d); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if len(d.Data) != 1024-schema.WireHeaderBytes-2 || !bytes.HasPrefix(d.Data, []byte("SLB1")) {
			t.Fatalf("value %d: data of %d bytes starting %q; want 1017 bytes of the load generator's payload", i, len(d.Data), d.Data[:min(4, len(d.Data))])
		}
	}
	_, err = r.produce.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: r.topic.GetName(),
		Records: []*sluicev1.Record{{Value: []byte("SLB1 not framed")}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("an unframed value on the topic: %v; want INVALID_ARGUMENT (validation on)", err)
	}
}

// Without Schema, nothing changes: no subject is registered, the topic has
// no schema.subject, and the values are the load generator's payloads.
func TestSchemaOffLeavesValuesAlone(t *testing.T) {
	r := runSchemaWorkload(t, "")
	if got, ok := r.topic.GetConfig()["schema.subject"]; ok && got != "" {
		t.Fatalf("topic config schema.subject = %q; want none", got)
	}
	if got, ok := r.res.DriverSettings["client.schema"]; ok {
		t.Errorf("driver settings client.schema = %q; want none", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls, err := r.schemas.ListSubjects(ctx, connect.NewRequest(&sluicev1.ListSubjectsRequest{Deleted: true}))
	if err != nil || len(ls.Msg.GetSubjects()) != 0 {
		t.Fatalf("ListSubjects: %v, %v; want none", ls, err)
	}
	for i, val := range r.values {
		if len(val) != 1024 || !bytes.HasPrefix(val, []byte("SLB1")) {
			t.Fatalf("value %d: %d bytes starting %q; want the load generator's 1024-byte payload", i, len(val), val[:min(4, len(val))])
		}
	}
}
