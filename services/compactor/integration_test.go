//go:build integration

package compactor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/catalog"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/segment"
)

// realStack is the integration tier's world: a DynamoDB catalog table and
// an S3 bucket on the AWS emulator, three `sluice bookie` processes
// registered in it, and a ledger client of the test's own.
type realStack struct {
	t        *testing.T
	endpoint string // the catalog's endpoint (a serializing proxy to the emulator)
	table    string
	objects  string // s3:// URL of the bucket
	bin      string // the sluice binary
	env      []string
	cat      *catalog.Catalog
	bucket   *blob.Bucket
	ledgers  *client.Client
	bookies  []*bookieproc.Proc
	written  map[catalog.LedgerID][]byte
	lease    catalog.WriterLease
}

// serialProxy forwards to the emulator one request at a time: moto's
// DynamoDB is not safe under concurrent requests (docs/testing.md), and several
// processes share it here. Real DynamoDB needs no such thing.
func serialProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func newRealStack(t *testing.T, ctx context.Context) *realStack {
	t.Helper()
	aws0 := testenv.AWSEndpoint(t)
	s := &realStack{t: t, endpoint: serialProxy(t, aws0), written: map[catalog.LedgerID][]byte{}}
	s.table = fmt.Sprintf("sluice-compactor-%d", time.Now().UnixNano())
	awsCfg := testenv.AWSConfig(t, s.endpoint)
	var err error
	dc, opts := catdynamo.NewClient(awsCfg), catdynamo.Options{Table: s.table}
	if s.cat, err = catdynamo.New(dc, opts); err != nil {
		t.Fatal(err)
	}
	if err := catdynamo.EnsureTable(ctx, dc, opts); err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("sluice-compactor-%d", time.Now().UnixNano())
	s3c := s3.NewFromConfig(testenv.AWSConfig(t, aws0), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	q := url.Values{"endpoint": {aws0}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	s.objects = "s3://" + bucket + "?" + q.Encode()
	if s.bucket, err = objstore.Open(ctx, s.objects); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.bucket.Close() })
	s.env = []string{"AWS_ENDPOINT_URL=" + s.endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}
	if s.bin, err = bookieproc.Build(ctx, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for i := 1; i <= 3; i++ {
		addr, err := bookieproc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		p := &bookieproc.Proc{ID: fmt.Sprintf("bookie-%d", i), Addr: addr, Dir: filepath.Join(root, fmt.Sprintf("b%d", i)), Bin: s.bin, Env: s.env,
			Args: []string{"--catalog-table", s.table, "--heartbeat", "1s"}}
		t.Cleanup(func() { _ = p.Stop() })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		s.bookies = append(s.bookies, p)
	}
	if s.ledgers, err = client.New(client.Config{Ledgers: s.cat, Bookies: s.cat}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.ledgers.Close() })
	// Bookies register at start; wait until all three are live.
	for {
		live, err := s.cat.ListLiveBookies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d bookies registered", len(live))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.cat.CreateTopic(ctx, "orders", 1, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cat.HeartbeatOwner(ctx, "writer", "127.0.0.1:1", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := s.cat.AcquireWriter(ctx, "orders", 0, "writer")
	if err != nil {
		t.Fatal(err)
	}
	s.lease = p.Lease()
	return s
}

// ledgers writes n sealed ledgers of entries×perEntry records to the chain
// ("produce, roll"), each rolled to the next.
func (s *realStack) writeLedgers(ctx context.Context, n, entries, perEntry int) []catalog.LedgerMetadata {
	s.t.Helper()
	var out []catalog.LedgerMetadata
	first := int64(0)
	for range n {
		w, err := s.ledgers.CreateLedger(ctx, catalog.LedgerSpec{
			Topic: "orders", TopicID: s.lease.TopicID, Partition: 0, Replication: catalog.DefaultReplication,
			FirstOffset: first, WriterOwner: s.lease.Owner, WriterEpoch: s.lease.Epoch,
		})
		if err != nil {
			s.t.Fatal(err)
		}
		if _, err := s.cat.AppendLedger(ctx, s.lease, catalog.LedgerRef{ID: w.ID(), FirstOffset: first}); err != nil {
			s.t.Fatal(err)
		}
		var all []byte
		for range entries {
			b := batch(s.t, first, perEntry, "orders")
			first += int64(perEntry)
			if _, err := w.Append(ctx, b); err != nil {
				s.t.Fatal(err)
			}
			all = append(all, b...)
		}
		m, err := w.Close(ctx, first-1)
		if err != nil {
			s.t.Fatal(err)
		}
		s.written[m.ID] = all
		out = append(out, m)
	}
	return out
}

// checkOffloaded: every ledger is OFFLOADED, its S3 object decodes to
// exactly the batches written, and no bookie process holds it any more.
func (s *realStack) checkOffloaded(ctx context.Context, ms []catalog.LedgerMetadata) {
	s.t.Helper()
	hc := &http.Client{Transport: &http.Transport{Protocols: func() *http.Protocols {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		return &p
	}()}}
	defer hc.CloseIdleConnections()
	for _, m := range ms {
		got, err := s.cat.GetLedger(ctx, m.ID)
		if err != nil {
			s.t.Fatal(err)
		}
		if got.State != catalog.LedgerOffloaded {
			s.t.Fatalf("ledger %d is %v", m.ID, got.State)
		}
		data, err := s.bucket.ReadAll(ctx, got.Location)
		if err != nil {
			s.t.Fatalf("ledger %d object %s: %v", m.ID, got.Location, err)
		}
		r, err := segment.Open(bytes.NewReader(data), int64(len(data)), segment.ReaderOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		raw, err := r.ReadRange(r.All(), nil)
		if err != nil {
			s.t.Fatal(err)
		}
		var batches []byte
		it := r.Batches(r.All(), raw)
		for it.Next() {
			batches = append(batches, it.Batch()...)
		}
		if it.Err() != nil || !bytes.Equal(batches, s.written[m.ID]) {
			s.t.Fatalf("ledger %d: segment batches differ from those written (%v)", m.ID, it.Err())
		}
		for _, b := range s.bookies {
			bc := bookiev1connect.NewBookieServiceClient(hc, "http://"+b.Addr, connect.WithGRPC())
			resp, err := bc.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: int64(m.ID), FirstEntry: 0, LastEntry: m.LastEntry}))
			if err == nil && len(resp.Msg.GetEntries()) > 0 {
				s.t.Fatalf("bookie %s still holds ledger %d", b.ID, m.ID)
			}
		}
	}
}

// Produce, roll, offload with `sluice compactor` as a process against the
// DynamoDB catalog, S3 and real bookie processes: the objects exist and
// decode to the batches written, the bookies no longer hold the ledgers,
// and a `sluice fetch` process reading from S3 returns every record from
// offset 0, identical and in order.
func TestIntegrationCompactorProcessOffloadsToS3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newRealStack(t, ctx)
	ms := s.writeLedgers(ctx, 3, 20, 10)
	cmd := exec.CommandContext(ctx, s.bin, "compactor", "--catalog-table", s.table, "--objects", s.objects,
		"--offload-age", "-1ns", "--bookie-delete-grace", "-1ns", "--once")
	cmd.Env = append(os.Environ(), s.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sluice compactor --once: %v\n%s", err, stderr.String())
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil || r.Offloaded != 3 || r.BookieDeletes != 3 || r.Errors != 0 {
		t.Fatalf("report %s (%v)\n%s", out, err, stderr.String())
	}
	s.checkOffloaded(ctx, ms)
	s.consumeAll(ctx, 3*20*10)
}

// consumeAll starts a `sluice fetch` process over the catalog, Cassandra
// and the bucket, and fetches offsets 0..n-1 of orders/0 from it: every
// record must be the one batch() wrote at its offset.
func (s *realStack) consumeAll(ctx context.Context, n int64) {
	t := s.t
	t.Helper()
	cassandra := testenv.Cassandra(t)
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	keyspace := fmt.Sprintf("compactor_it_%d", time.Now().UnixNano())
	fp := &bookieproc.Proc{ID: "fetch", Addr: addr, Bin: s.bin, Env: s.env, Command: "fetch",
		Args: []string{"--addr", addr, "--catalog-table", s.table, "--cassandra", cassandra, "--keyspace", keyspace,
			"--replication-factor", "1", "--objects", s.objects}}
	t.Cleanup(func() {
		_ = fp.Stop()
		dropKeyspace(t, cassandra, keyspace)
	})
	if err := fp.Start(); err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer hc.CloseIdleConnections()
	cons := sluicev1connect.NewConsumerServiceClient(hc, "http://"+addr, connect.WithGRPC())
	next := int64(0)
	for next < n {
		resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "orders", Partition: 0, Offset: next, MaxRecords: 1000, MaxWaitMs: 200}))
		if err != nil {
			t.Fatalf("fetch from %d: %v\n%s", next, err, fp.Log())
		}
		for _, r := range resp.Msg.GetRecords() {
			if r.GetOffset() != next || string(r.GetValue()) != fmt.Sprintf("orders-%d", next) || string(r.GetKey()) != fmt.Sprintf("k%d", next%7) {
				t.Fatalf("record at %d: offset %d key %q value %q; want the one written at %d", next, r.GetOffset(), r.GetKey(), r.GetValue(), next)
			}
			next++
		}
		if ctx.Err() != nil {
			t.Fatalf("fetched %d of %d records before the deadline", next, n)
		}
	}
}

// dropKeyspace removes a test keyspace (best effort: a failure is logged).
func dropKeyspace(t *testing.T, host, keyspace string) {
	c := gocql.NewCluster(host)
	c.Timeout = 30 * time.Second
	sess, err := c.CreateSession()
	if err != nil {
		t.Logf("drop keyspace %s: %v", keyspace, err)
		return
	}
	defer sess.Close()
	if err := sess.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
		t.Logf("drop keyspace %s: %v", keyspace, err)
	}
}

// The Lambda main under AWS's Runtime Interface Emulator: built as Lambda
// builds it, configured by its environment, invoked through the Lambda
// Invoke API with an EventBridge scheduled event, it does a real pass.
func TestIntegrationLambdaPassUnderRIE(t *testing.T) {
	testenv.LambdaEndpoint(t) // the stack installed the emulator
	rie := rieBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newRealStack(t, ctx)
	ms := s.writeLedgers(ctx, 2, 10, 5)

	dir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, "bootstrap"), "./lambda")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the function: %v\n%s", err, out)
	}
	apiAddr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	runtimeAddr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// The emulator runs one function, always named "function"; this one
	// is ours, on ports of its own (the stack's runs the echo function).
	proc := &bookieproc.Proc{ID: "rie", Addr: apiAddr, Bin: rie, Command: "--runtime-interface-emulator-address",
		Args: []string{apiAddr, "--runtime-api-address", runtimeAddr, filepath.Join(dir, "bootstrap")},
		Env: append(s.env, "AWS_LAMBDA_FUNCTION_NAME=compactor",
			"SLUICE_CATALOG_TABLE="+s.table, "SLUICE_OBJECTS="+s.objects,
			"SLUICE_COMPACTOR_OFFLOAD_AGE=-1ns", "SLUICE_COMPACTOR_BOOKIE_DELETE_GRACE=-1ns")}
	t.Cleanup(func() { _ = proc.Stop() })
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	lc := awslambda.NewFromConfig(testenv.AWSConfig(t, "http://"+apiAddr))
	payload, err := json.Marshal(events.CloudWatchEvent{
		Version: "0", ID: "test-event", DetailType: "Scheduled Event", Source: "aws.events",
		AccountID: "123456789012", Time: time.Now().UTC(), Region: "us-east-1",
		Resources: []string{"arn:aws:events:us-east-1:123456789012:rule/sluice-compactor"}, Detail: json.RawMessage(`{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := lc.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String("function"), Payload: payload})
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, proc.Log())
	}
	// The emulator answers a function error with 200 and no error header:
	// look at the payload.
	if out.FunctionError != nil || strings.Contains(string(out.Payload), "errorMessage") {
		t.Fatalf("function error: %s\n%s", out.Payload, proc.Log())
	}
	var r Report
	if err := json.Unmarshal(out.Payload, &r); err != nil || r.Offloaded != len(ms) || r.BookieDeletes != len(ms) || r.Errors != 0 {
		t.Fatalf("report %s (%v)\n%s", out.Payload, err, proc.Log())
	}
	s.checkOffloaded(ctx, ms)
}

// rieBinary finds the emulator localstack/lambda.sh installed.
func rieBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_CACHE_DIR")
	if dir == "" {
		root, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(root))), ".cache")
	}
	p := filepath.Join(dir, "bin", "aws-lambda-rie")
	if _, err := os.Stat(p); err != nil {
		if testenv.InCI() || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the Lambda emulator is not at %s: %v (localstack/stack.sh up lambda installs it)", p, err)
		}
		t.Skipf("the Lambda emulator is not at %s (localstack/stack.sh up lambda installs it)", p)
	}
	return p
}

// writeBigLedger writes one sealed ledger of entries × 64 KiB batches
// (several S3 parts at the minimum part size) after the chain's tail.
func (s *realStack) writeBigLedger(ctx context.Context, first int64, entries int) catalog.LedgerMetadata {
	s.t.Helper()
	w, err := s.ledgers.CreateLedger(ctx, catalog.LedgerSpec{
		Topic: "orders", TopicID: s.lease.TopicID, Partition: 0, Replication: catalog.DefaultReplication,
		FirstOffset: first, WriterOwner: s.lease.Owner, WriterEpoch: s.lease.Epoch,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.cat.AppendLedger(ctx, s.lease, catalog.LedgerRef{ID: w.ID(), FirstOffset: first}); err != nil {
		s.t.Fatal(err)
	}
	var all []byte
	off := first
	for range entries {
		b := benchBatch(s.t, off, 64)
		off += 64
		if _, err := w.Append(ctx, b); err != nil {
			s.t.Fatal(err)
		}
		all = append(all, b...)
	}
	m, err := w.Close(ctx, off-1)
	if err != nil {
		s.t.Fatal(err)
	}
	s.written[m.ID] = all
	return m
}

// `sluice compactor` killed (exit, no cleanup) at every step of an offload
// of a ledger larger than one S3 part (5 MiB parts, a 6.6 MiB ledger: the
// mid-upload kill comes after the first part was handed to the multipart
// upload), then run again: right after the
// kill the ledger is whole on the bookies or verified in S3 (never
// neither), a kill mid-upload leaves no object (the multipart upload is
// never completed), and the rerun offloads it with no gap or duplicate,
// drops the bookie copies, and leaves no marker and no stray object.
func TestIntegrationCompactorKilledAtEveryStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := newRealStack(t, ctx)
	check, err := New(Config{}, Deps{Catalog: s.cat, Ledgers: s.ledgers, Objects: s.bucket})
	if err != nil {
		t.Fatal(err)
	}
	run := func(exitAt string) (int, string) {
		cmd := exec.CommandContext(ctx, s.bin, "compactor", "--catalog-table", s.table, "--objects", s.objects,
			"--offload-age", "-1ns", "--bookie-delete-grace", "-1ns", "--workers", "1", "--upload-part-mib", "5", "--once")
		cmd.Env = append(append(os.Environ(), s.env...), EnvExitAt+"="+exitAt)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatalf("sluice compactor: %v\n%s", err, out)
		}
		return 0, string(out)
	}
	first := int64(0)
	var done []catalog.LedgerMetadata
	for _, step := range []Step{StepBeforeUpload, StepMidUpload, StepAfterUpload, StepBeforeCAS, StepAfterCAS, StepBeforeBookieDelete} {
		m := s.writeBigLedger(ctx, first, 100)
		first = m.LastOffset + 1
		if code, out := run(step.String()); code != ExitAtStatus {
			t.Fatalf("%v: exit status %d, want %d (the kill)\n%s", step, code, ExitAtStatus, out)
		}
		got, err := s.cat.GetLedger(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch got.State {
		case catalog.LedgerClosed:
			ents, err := s.ledgers.ReadEntries(ctx, m.ID, 0, m.LastEntry)
			if err != nil || len(ents) != int(m.LastEntry+1) {
				t.Fatalf("%v: CLOSED ledger read %d entries, %v", step, len(ents), err)
			}
		case catalog.LedgerOffloaded:
			if _, err := check.verifyObject(ctx, got.Location, got); err != nil {
				t.Fatalf("%v: OFFLOADED ledger: %v", step, err)
			}
		default:
			t.Fatalf("%v: ledger is %v", step, got.State)
		}
		if step <= StepMidUpload {
			if _, err := s.bucket.Attributes(ctx, check.segmentKey(m)); !objstore.IsNotFound(err) {
				t.Fatalf("%v: an object exists after the kill: %v", step, err)
			}
		}
		if code, out := run(""); code != 0 {
			t.Fatalf("%v: rerun exit status %d\n%s", step, code, out)
		}
		done = append(done, m)
		s.checkOffloaded(ctx, done)
	}
	var keys []string
	it := s.bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	var want []string
	for _, m := range done {
		want = append(want, check.segmentKey(m))
	}
	// The cursors are present only when a listing needed several passes.
	want = append(want, sweepCursorKey, offloadCursorKey, purgeCursorKey, pendingCursorKey, rereplicateCursorKey)
	for _, k := range keys {
		if !slices.Contains(want, k) {
			t.Fatalf("stray object %s (objects %v)", k, keys)
		}
	}
	if len(keys) < len(done) {
		t.Fatalf("objects %v, want the %d segments", keys, len(done))
	}
}
