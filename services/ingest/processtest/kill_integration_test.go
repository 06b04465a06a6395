//go:build integration

package processtest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/testenv"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// serialProxy forwards to moto one request at a time: moto's DynamoDB is not
// safe under concurrent requests (docs/testing.md), and here five processes share
// it. Real DynamoDB needs no such thing.
func serialProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // clients hanging up at shutdown are expected
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Two ingest copies and three bookies as processes. An idempotent producer
// writes through copy 1 (which forwards copy 2's partitions to it) while copy
// 2 is killed with SIGKILL: its partitions are writable again within a few
// seconds (lease expiry, then takeover with fencing recovery), and in the end
// every acknowledged record is stored exactly once, at its acknowledged
// offset, in produce order per partition.
func TestIntegrationKill9IngestUnderIdempotentLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	endpoint := serialProxy(t, testenv.AWSEndpoint(t))
	table := fmt.Sprintf("sluice-kill9-%d", time.Now().UnixNano())
	awsCfg := testenv.AWSConfig(t, endpoint)
	dc, opts := catdynamo.NewClient(awsCfg), catdynamo.Options{Table: table}
	cat, err := catdynamo.New(dc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := catdynamo.EnsureTable(ctx, dc, opts); err != nil {
		t.Fatal(err)
	}
	env := []string{"AWS_ENDPOINT_URL=" + endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	start := func(p *bookieproc.Proc) *bookieproc.Proc {
		t.Helper()
		t.Cleanup(func() { _ = p.Stop() })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addr := func() string {
		a, err := bookieproc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for i := 1; i <= 3; i++ {
		start(&bookieproc.Proc{ID: fmt.Sprintf("bookie-%d", i), Addr: addr(), Dir: filepath.Join(root, fmt.Sprintf("b%d", i)), Bin: bin, Env: env,
			Args: []string{"--catalog-table", table, "--heartbeat", "1s"}})
	}
	ingests := make([]*bookieproc.Proc, 2)
	for i := range ingests {
		a := addr()
		ingests[i] = start(&bookieproc.Proc{ID: fmt.Sprintf("ingest-%d", i+1), Addr: a, Bin: bin, Env: env, Command: "ingest",
			Args: []string{"--addr", a, "--id", fmt.Sprintf("ingest-%d", i+1), "--catalog-table", table,
				"--owner-ttl", "3s", "--heartbeat", "1s", "--balance-interval", "300ms"}})
	}
	sc, err := sluice.NewClient(ingests[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	const partitions = 4
	if _, err := sc.CreateTopic(ctx, "k9", partitions, nil); err != nil {
		t.Fatal(err)
	}
	// Wait until the copies split the partitions, so the killed one owns some.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := cat.ListPartitions(ctx, "k9", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, p := range page.Items {
			n[p.Owner]++
		}
		if n["ingest-1"] == 2 && n["ingest-2"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions not balanced over the copies after 30s: %v\n%s", n, ingests[1].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	prod, err := sc.NewProducer(sluice.WithLinger(2 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	type ack struct {
		partition int32
		offset    int64
		seq       int // produce order
	}
	var (
		mu     sync.Mutex
		acks   = map[string]ack{}
		failed []error
	)
	const total = 4000
	var wg sync.WaitGroup
	var killedAt time.Time
	for i := 0; i < total; i++ {
		if i == total/3 {
			if err := ingests[1].Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt = time.Now()
			t.Logf("killed ingest-2 after %d records", i)
		}
		v := fmt.Sprintf("value-%06d", i)
		wg.Add(1)
		prod.Produce(ctx, &sluice.Record{Topic: "k9", Partition: int32(i % partitions), Value: []byte(v)}, func(r sluice.Result) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", v, r.Err))
				return
			}
			acks[v] = ack{r.Partition, r.Offset, i}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := prod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	if len(acks) != total {
		t.Fatalf("%d of %d records acknowledged", len(acks), total)
	}
	took := time.Since(killedAt)
	t.Logf("all %d records acknowledged %v after the kill", total, took.Round(time.Millisecond))
	// The killed copy's partitions come back after its lease expires (3 s
	// here) plus a takeover; everything queued meanwhile then drains.
	if took > 20*time.Second {
		t.Fatalf("the records produced after the kill took %v to be acknowledged", took)
	}

	// Read every partition back from the ledgers (recovering any ledger the
	// killed copy left open) and check: exactly once, at the acknowledged
	// offset, produce order kept.
	lc, err := client.New(client.Config{Ledgers: cat, Bookies: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	seen := map[string]bool{}
	for p := 0; p < partitions; p++ {
		part, err := cat.GetPartition(ctx, "k9", p)
		if err != nil {
			t.Fatal(err)
		}
		lastSeq := -1
		for _, ref := range part.Ledgers {
			m, err := lc.Recover(ctx, ref.ID, lastOffset)
			if err != nil {
				t.Fatal(err)
			}
			if m.LastEntry < 0 {
				continue
			}
			ents, err := lc.ReadEntries(ctx, ref.ID, 0, m.LastEntry)
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
						v := string(rec.Value)
						a, ok := acks[v]
						switch {
						case seen[v]:
							t.Fatalf("partition %d: %s stored twice (again at offset %d)", p, v, rec.Offset)
						case ok && (a.partition != int32(p) || a.offset != rec.Offset):
							t.Fatalf("%s acknowledged at %d/%d, stored at %d/%d", v, a.partition, a.offset, p, rec.Offset)
						case ok && a.seq < lastSeq:
							t.Fatalf("partition %d: %s (produced %d-th) stored after a record produced later", p, v, a.seq)
						}
						seen[v] = true
						if ok {
							lastSeq = a.seq
						}
					}
					rest = r
				}
			}
		}
	}
	for v := range acks {
		if !seen[v] {
			t.Fatalf("acknowledged %s is not stored", v)
		}
	}
}

func lastOffset(_ int64, payload []byte) (int64, error) {
	last := int64(-1)
	for rest := payload; len(rest) > 0; {
		b, r, err := record.Split(rest)
		if err != nil {
			return 0, err
		}
		last, rest = b.LastOffset(), r
	}
	return last, nil
}
