package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

// Every limit on what a Produce may carry answers INVALID_ARGUMENT (never
// RESOURCE_EXHAUSTED, which clients retry), worded from the one table of
// limits (internal/apierr): the field, the size, the limit in force by the
// name users know, and what to do. Through the public API of an in-process
// `sluice dev`, over Connect; nothing of a refused request is stored.
func TestProduceLimits(t *testing.T) {
	const reqLimit = 8 << 20 // above the server's 4 MiB batch limit, so that one is reachable
	c := startCluster(t, func(cfg *cluster.Config) { cfg.Server.MaxRequestBytes = reqLimit })
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, c.url)
	prod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, c.url)
	for name, cfg := range map[string]map[string]string{
		"t":   nil,                                           // max.message.bytes 1048588, the default
		"big": {"max.message.bytes": strconv.Itoa(16 << 20)}, // above the server's batch limit
	} {
		if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: 1, Config: cfg})); err != nil {
			t.Fatal(err)
		}
	}
	p0 := int32(0)
	recs := func(n int, f func(i int) *sluicev1.Record) []*sluicev1.Record {
		out := make([]*sluicev1.Record, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	value := func(n int) func(int) *sluicev1.Record {
		return func(int) *sluicev1.Record { return &sluicev1.Record{Value: make([]byte, n)} }
	}
	// A record whose batch is exactly max.message.bytes passes; one byte
	// more does not.
	atLimit := 1048588
	for record.BatchSize(&record.Record{Value: make([]byte, atLimit)}) > 1048588 {
		atLimit--
	}
	batch := func(lim record.Limits, codec record.Codec, rs ...*record.Record) []byte {
		b, err := record.NewBuilder(record.BuilderOptions{Limits: lim, Codec: codec})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := b.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	wide := record.MaxLimits()
	many := make([]*record.Record, 10_001)
	for i := range many {
		many[i] = &record.Record{Value: []byte("v")}
	}
	bomb := make([]*record.Record, 17)
	for i := range bomb {
		bomb[i] = &record.Record{Value: make([]byte, 1<<20)}
	}

	for _, tc := range []struct {
		name   string
		req    *sluicev1.ProduceRequest
		header string // Sluice-Client-Id
		limit  apierr.Limit
		want   string
	}{
		{"request", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(20<<20))}, "", apierr.RequestBytes,
			"request: 20971533 bytes is over the server's request size limit of 8388608 bytes; send less per request, or raise the limit with the server's --max-request-bytes flag"},
		{"record over max.message.bytes", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(atLimit+1))}, "", apierr.MaxMessageBytes,
			"records[0]: 1048589 bytes is over the topic's max.message.bytes of 1048588 bytes; send fewer or smaller records per request, or use a topic created with a larger max.message.bytes (sluice topic create NAME --config max.message.bytes=N)"},
		// Over the value limit too: a larger max.message.bytes would not
		// let it through, so the answer names the value limit.
		{"value just over 1 MiB", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(1<<20+1))}, "", apierr.ValueBytes,
			"records[0].value: 1048577 bytes is over the server's record value size limit of 1048576 bytes"},
		{"records of one partition over max.message.bytes", &sluicev1.ProduceRequest{Topic: "t", Partition: &p0, Records: recs(3, value(400_000))}, "", apierr.MaxMessageBytes,
			"records for partition 0: over the topic's max.message.bytes of 1048588 bytes; send fewer or smaller records per request"},
		// A value no topic config would let through names the server's
		// value limit, not the batch limits (max.message.bytes would be a
		// false hint).
		{"value over the server's limit, on a topic taking larger batches", &sluicev1.ProduceRequest{Topic: "big", Records: recs(1, value(5<<20))}, "", apierr.ValueBytes,
			"records[0].value: 5242880 bytes is over the server's record value size limit of 1048576 bytes; use a smaller value, e.g. store a large payload elsewhere and send its address (a server limit, whatever the topic's max.message.bytes)"},
		{"records of one partition over the server's batch limit", &sluicev1.ProduceRequest{Topic: "big", Partition: &p0, Records: recs(5, value(1_000_000))}, "", apierr.ServerBatchBytes,
			"records for partition 0: over the server's batch size limit of 4194304 bytes; send fewer or smaller records per request (this server limit caps every topic's max.message.bytes)"},
		{"value", &sluicev1.ProduceRequest{Topic: "big", Records: recs(2, func(i int) *sluicev1.Record { return &sluicev1.Record{Value: make([]byte, (i+1)<<20)} })}, "", apierr.ValueBytes,
			"records[1].value: 2097152 bytes is over the server's record value size limit of 1048576 bytes; use a smaller value"},
		{"key", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, func(int) *sluicev1.Record { return &sluicev1.Record{Key: make([]byte, 64<<10+1)} })}, "", apierr.KeyBytes,
			"records[0].key: 65537 bytes is over the server's record key size limit of 65536 bytes; use a smaller key (a server limit)"},
		{"headers", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, func(int) *sluicev1.Record {
			hs := make([]*sluicev1.Header, 65)
			for i := range hs {
				hs[i] = &sluicev1.Header{Key: "h"}
			}
			return &sluicev1.Record{Headers: hs}
		})}, "", apierr.HeadersPerRecord,
			"records[0].headers: 65 headers is over the server's headers-per-record limit of 64 headers; send fewer headers per record (a server limit)"},
		{"header key", &sluicev1.ProduceRequest{Topic: "t", Records: recs(2, func(i int) *sluicev1.Record {
			return &sluicev1.Record{Headers: []*sluicev1.Header{{Key: "a"}, {Key: strings.Repeat("k", 256+i)}}}
		})}, "", apierr.HeaderKeyBytes,
			"records[1].headers[1].key: 257 bytes is over the server's header key size limit of 256 bytes; use a shorter header key (a server limit)"},
		{"header value", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, func(int) *sluicev1.Record {
			return &sluicev1.Record{Headers: []*sluicev1.Header{{Key: "h", Value: make([]byte, 16<<10+1)}}}
		})}, "", apierr.HeaderValueBytes,
			"records[0].headers[0].value: 16385 bytes is over the server's header value size limit of 16384 bytes; use a smaller header value (a server limit)"},
		{"records per request", &sluicev1.ProduceRequest{Topic: "t", Records: recs(10_001, value(1))}, "", apierr.RecordsPerRequest,
			"records: 10001 records is over the server's records-per-request limit of 10000 records; send fewer records per request (a server limit)"},
		{"batches per request", &sluicev1.ProduceRequest{Topic: "t", Batches: emptyBatches(1001)}, "", apierr.BatchesPerRequest,
			"batches: 1001 batches is over the server's batches-per-request limit of 1000 batches; send fewer batches per request (a server limit)"},
		{"batch over max.message.bytes", &sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Data: batch(wide, record.CodecNone, &record.Record{Value: make([]byte, 600_000)}, &record.Record{Value: make([]byte, 600_000)})}}}, "", apierr.MaxMessageBytes,
			"batches[0]: 1200083 bytes is over the topic's max.message.bytes of 1048588 bytes"},
		{"key in a batch", &sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Data: batch(wide, record.CodecNone, &record.Record{Value: []byte("v")}, &record.Record{Key: make([]byte, 70_000)})}}}, "", apierr.KeyBytes,
			"batches[0].data.records[1].key: 70000 bytes is over the server's record key size limit of 65536 bytes"},
		{"records per batch", &sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Data: batch(wide, record.CodecNone, many...)}}}, "", apierr.RecordsPerBatch,
			"batches[0]: 10001 records is over the server's records-per-batch limit of 10000 records; send fewer records per batch (a server limit)"},
		{"decompressed batch", &sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Data: batch(wide, record.CodecZstd, bomb...)}}}, "", apierr.DecompressedBatchBytes,
			"batches[0]: over the server's decompressed batch size limit of 16777216 bytes; send fewer or smaller records per batch (a server limit)"},
		{"client id", &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(1))}, strings.Repeat("c", 256), apierr.ClientIDBytes,
			"Sluice-Client-Id: 256 bytes is over the Sluice-Client-Id size limit of 255 bytes; use a shorter client id (a server limit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := connect.NewRequest(tc.req)
			if tc.header != "" {
				req.Header().Set("Sluice-Client-Id", tc.header)
			}
			_, err := prod.Produce(ctx, req)
			checkLimitErr(t, err, tc.limit, tc.want)
		})
	}

	// At the limit passes: a record whose batch is max.message.bytes.
	if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(atLimit))})); err != nil {
		t.Fatalf("a record of exactly max.message.bytes: %v", err)
	}

	// ProduceStream: a request over a limit is answered with the error,
	// and the stream goes on; a message over the request limit ends the
	// stream with the same answer as the unary call.
	h2c := h2cClient()
	sprod := sluicev1connect.NewProducerServiceClient(h2c, c.url)
	st := sprod.ProduceStream(ctx)
	for id, r := range []*sluicev1.ProduceRequest{
		{Topic: "t", Records: recs(1, value(atLimit+1))},
		{Topic: "t", Records: recs(1, value(10))},
	} {
		if err := st.Send(&sluicev1.ProduceStreamRequest{CorrelationId: uint64(id), Request: r}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := st.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if pe := first.GetError(); pe == nil || connect.Code(pe.GetCode()) != connect.CodeInvalidArgument || pe.GetReason() != apierr.ReasonLimitExceeded ||
		!strings.Contains(pe.GetMessage(), "records[0]: 1048589 bytes is over the topic's max.message.bytes of 1048588 bytes") {
		t.Errorf("stream answer to a record over max.message.bytes: %v", first)
	}
	if second, err := st.Receive(); err != nil || second.GetError() != nil {
		t.Errorf("the stream's next request: %v, %v; want it stored", second, err)
	}
	if err := st.Send(&sluicev1.ProduceStreamRequest{CorrelationId: 9, Request: &sluicev1.ProduceRequest{Topic: "t", Records: recs(1, value(reqLimit))}}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Receive()
	checkLimitErr(t, err, apierr.RequestBytes, "request: 8388628 bytes is over the server's request size limit of 8388608 bytes")
	_ = st.CloseRequest()
	_ = st.CloseResponse()

	// As curl sends it (the 20 MB of issue 30): JSON over HTTP/1.1,
	// answered 400 invalid_argument, not 429.
	body := []byte(`{"topic":"t","records":[{"value":"` + strings.Repeat("A", 27<<20) + `"}]}`)
	resp, err := http.Post(c.url+"/sluice.v1.ProducerService/Produce", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), `"code":"invalid_argument"`) ||
		!strings.Contains(string(got), strconv.Itoa(len(body))+" bytes is over the server's request size limit of 8388608 bytes") {
		t.Errorf("curl-like Produce of 27 MB: %d %.300s", resp.StatusCode, got)
	}

	// Nothing refused was stored: "t" holds the record at the limit and
	// the stream's small one, "big" nothing.
	cons := sluicev1connect.NewConsumerServiceClient(http.DefaultClient, c.url)
	for topic, want := range map[string][]int{"t": {atLimit, 10}, "big": nil} {
		f, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, MaxRecords: 100, MaxBytes: 8 << 20}))
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for _, r := range f.Msg.Records {
			sizes = append(sizes, len(r.Value))
		}
		if len(sizes) != len(want) || f.Msg.HighWatermark != int64(len(want)) {
			t.Fatalf("%s holds %d records of sizes %v (high watermark %d); want sizes %v", topic, len(sizes), sizes, f.Msg.HighWatermark, want)
		}
		for i := range want {
			if sizes[i] != want[i] {
				t.Fatalf("%s holds records of sizes %v; want %v", topic, sizes, want)
			}
		}
	}
}

// A copy at its bound on partitions written answers RESOURCE_EXHAUSTED
// with a retry delay: throttling, which clients retry (another copy may
// take the partition), unlike a limit on the request.
func TestWriterLimitIsThrottling(t *testing.T) {
	c := startCluster(t, func(cfg *cluster.Config) { cfg.Ingest.MaxWriters, cfg.Ingest.BalanceInterval = 1, -1 })
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, c.url)
	prod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, c.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32) error {
		_, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: []*sluicev1.Record{{Value: []byte("v")}}}))
		return err
	}
	if err := produce(0); err != nil {
		t.Fatal(err)
	}
	err := produce(1)
	if d, ok := apierr.RetryDelay(err); connect.CodeOf(err) != connect.CodeResourceExhausted || !ok || d <= 0 {
		t.Fatalf("the copy's second partition: %v; want RESOURCE_EXHAUSTED with a retry delay", err)
	}
}

// checkLimitErr asserts a TooLarge answer: INVALID_ARGUMENT with the
// limit's ErrorInfo and the message (a prefix or the whole).
func checkLimitErr(t *testing.T, err error, l apierr.Limit, want string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("err = %v; want InvalidArgument", err)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message(), want) {
		t.Fatalf("message %q\nwant %q", ce.Message(), want)
	}
	if apierr.Reason(err) != apierr.ReasonLimitExceeded {
		t.Errorf("reason %q, want %s", apierr.Reason(err), apierr.ReasonLimitExceeded)
	}
	if !strings.Contains(ce.Message(), l.Name) {
		t.Errorf("message %q does not name %q", ce.Message(), l.Name)
	}
	if _, ok := apierr.RetryDelay(err); ok {
		t.Errorf("a limit answer carries a retry delay")
	}
}

type testCluster struct {
	c   *cluster.Cluster
	url string
}

func startCluster(t *testing.T, mod func(*cluster.Config)) *testCluster {
	t.Helper()
	cfg := cluster.Config{Dir: t.TempDir(), Addr: "127.0.0.1:0"}
	cfg.Server.ShutdownTimeout = 300 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "shutdown") {
			t.Errorf("cluster Run: %v", err)
		}
	})
	return &testCluster{c: c, url: "http://" + c.Addr()}
}

func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

func emptyBatches(n int) []*sluicev1.EncodedBatch {
	out := make([]*sluicev1.EncodedBatch, n)
	for i := range out {
		out[i] = &sluicev1.EncodedBatch{}
	}
	return out
}
