//go:build integration

package dynamodb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/catalogtest"
)

var tableSeq atomic.Int64

// serialHTTP sends one request at a time. Stock moto's DynamoDB is not safe
// for concurrent requests (localstack/moto/serve.py serializes them on the
// server; this keeps the suite right against a stock moto_server too): it holds no lock, and TransactWriteItems deep-copies
// the table to restore it on cancellation — racing requests make that copy
// fail with HTTP 500 ("dictionary changed size during iteration") or
// restore a copy over another request's committed write. Real DynamoDB
// applies each request atomically; serializing requests gives moto that
// model, so the suite's races still interleave every request of every
// racer in arbitrary order and test the catalog's conditions, not moto's
// locking. The whole exchange, response body included, happens under the
// lock: releasing it once the headers were in let sporadic "use of closed
// network connection" errors through (werkzeug closes every connection
// after its response).
type serialHTTP struct {
	mu   *sync.Mutex
	next aws.HTTPClient
}

var motoMu sync.Mutex

func (h serialHTTP) Do(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	resp, err := h.next.Do(r)
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	// Read the whole response before the next request goes out.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// newTestCatalog creates a catalog on a fresh, uniquely named table on the
// AWS emulator and deletes the table when the test ends. It returns the
// driver, for the tests that reach into it; catalog.New(it) is what callers
// get.
func newTestCatalog(t *testing.T, clock catalog.Clock) *store {
	t.Helper()
	cfg := testenv.AWSConfig(t, testenv.AWSEndpoint(t))
	cfg.HTTPClient = serialHTTP{mu: &motoMu, next: cfg.HTTPClient}
	client := NewClient(cfg)
	table := fmt.Sprintf("sluice-catalog-test-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	c, err := newStore(client, Options{Table: table, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ensureTable(ctx); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return c
}

func TestIntegrationDynamoDBCatalogConformance(t *testing.T) {
	catalogtest.Run(t, catalogtest.Harness{
		New: func(t *testing.T, clock catalog.Clock) catalogtest.Backend {
			return catalog.New(newTestCatalog(t, clock))
		},
	})
}

// TestIntegrationDynamoDBCatalogCancellationReasons changes the world between
// AcquireWriter's decision and its transaction, so each ConditionCheck fails
// for real on the emulator and its cancellation reason must come back as
// the matching typed error, with nothing written.
func TestIntegrationDynamoDBCatalogCancellationReasons(t *testing.T) {
	ctx := t.Context()
	clock := catalogtest.NewClock(catalogtest.Start)
	c := newTestCatalog(t, clock)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	heartbeat := func(id string) {
		t.Helper()
		_, err := c.HeartbeatOwner(ctx, id, id+":7420", 10*time.Second)
		must(err)
	}
	_, err := c.CreateTopic(ctx, "t", 1, catalog.DefaultTopicConfig())
	must(err)
	heartbeat("ingest-a")
	_, err = c.AcquireWriter(ctx, "t", 0, "ingest-a")
	must(err)

	cases := []struct {
		name    string
		between func()
		want    error
	}{
		// The old owner renews its heartbeat: the steal's ConditionCheck fails.
		{"old owner renewed", func() { heartbeat("ingest-a") }, catalog.ErrOwned},
		// Someone else took the partition first: the partition's version check fails.
		{"partition moved", func() {
			heartbeat("ingest-c")
			_, err := c.AcquireWriter(ctx, "t", 0, "ingest-c")
			must(err)
			clock.Advance(10 * time.Second) // ingest-c expires too
			heartbeat("ingest-b")
		}, catalog.ErrVersionConflict},
		// The acquirer shut down: its own heartbeat check fails.
		{"acquirer left", func() { must(c.RemoveOwner(ctx, "ingest-b")) }, catalog.ErrOwnerExpired},
		// The topic was deleted: the topic incarnation check fails.
		{"topic deleted", func() {
			_, err := c.DeleteTopic(ctx, "t")
			must(err)
		}, catalog.ErrNotFound},
	}
	for _, tc := range cases {
		clock.Advance(10 * time.Second) // every owner so far has expired
		heartbeat("ingest-b")
		before, err := c.GetPartition(ctx, "t", 0)
		must(err)
		plan, err := c.planAcquire(ctx, "t", 0, "ingest-b")
		if err != nil {
			t.Fatalf("%s: plan: %v", tc.name, err)
		}
		tc.between()
		after, _ := c.getPartitionByName(ctx, "t", before)
		err = c.transact(ctx, plan.ops)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: transaction error %v, want %v", tc.name, err, tc.want)
		}
		if got, _ := c.getPartitionByName(ctx, "t", before); got.Epoch != after.Epoch || got.Owner != after.Owner || got.Version != after.Version {
			t.Fatalf("%s: a canceled transaction changed the partition from %+v to %+v", tc.name, after, got)
		}
	}
}

// getPartitionByName re-reads the partition of the incarnation p was read from.
func (c *store) getPartitionByName(ctx context.Context, topic string, p catalog.Partition) (catalog.Partition, error) {
	got, _, err := c.getPartition(ctx, topic, p.TopicID, p.Index)
	return got, err
}

func TestIntegrationDynamoDBCatalogEnsureTable(t *testing.T) {
	ctx := t.Context()
	c := newTestCatalog(t, catalog.SystemClock{})
	if err := c.ensureTable(ctx); err != nil {
		t.Fatalf("EnsureTable on an existing table: %v", err)
	}

	// A table of the same name with other keys is refused, not used.
	cfg := testenv.AWSConfig(t, testenv.AWSEndpoint(t))
	cfg.HTTPClient = serialHTTP{mu: &motoMu, next: cfg.HTTPClient}
	client := NewClient(cfg)
	other := fmt.Sprintf("sluice-catalog-other-%d", time.Now().UnixNano())
	def := TableDefinition(other)
	def.AttributeDefinitions = def.AttributeDefinitions[:1]
	def.AttributeDefinitions[0].AttributeName = aws.String("id")
	def.KeySchema = def.KeySchema[:1]
	def.KeySchema[0].AttributeName = aws.String("id")
	if _, err := client.CreateTable(ctx, def); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	})
	if err := EnsureTable(ctx, client, Options{Table: other}); err == nil {
		t.Fatal("EnsureTable accepted a table keyed by id")
	}
}

// TestIntegrationDynamoDBCatalogRejectsCorruptItems: an item the catalog
// did not write (or wrote in another format) is an error, never a value.
func TestIntegrationDynamoDBCatalogRejectsCorruptItems(t *testing.T) {
	ctx := t.Context()
	c := newTestCatalog(t, catalog.SystemClock{})
	cat := catalog.New(c) // the calls as callers make them; c.api to plant items
	tp, err := cat.CreateTopic(ctx, "good", 1, catalog.DefaultTopicConfig())
	if err != nil {
		t.Fatal(err)
	}
	put := func(it map[string]av) {
		t.Helper()
		if _, err := c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &c.table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	future := topicItem(pkTopics, "future", tp)
	future[attrFormat] = n(formatVersion + 1)
	put(future)
	mistyped := topicItem(pkTopics, "mistyped", tp)
	mistyped["parts"] = s("one")
	put(mistyped)
	badConfig := topicItem(pkTopics, "badcfg", tp)
	badConfig["cfg"] = strMap(map[string]string{"retention.ms": "forever"})
	put(badConfig)
	for _, name := range []string{"future", "mistyped", "badcfg"} {
		if _, err := cat.GetTopic(ctx, name); !errors.Is(err, ErrCorrupt) {
			t.Errorf("GetTopic(%s): %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := cat.ListTopics(ctx, "", 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ListTopics over corrupt items: %v, want ErrCorrupt", err)
	}
	if _, err := cat.GetTopic(ctx, "good"); err != nil {
		t.Errorf("GetTopic(good): %v", err)
	}
}

// TestIntegrationDynamoDBCatalogRegistryBound: see the embedded twin; the
// bound is small here so the test stays fast.
func TestIntegrationDynamoDBCatalogRegistryBound(t *testing.T) {
	ctx := t.Context()
	c := newTestCatalog(t, catalog.SystemClock{})
	owner := func(id string) map[string]av {
		return ownerItem(catalog.Owner{ID: id, Address: "x:1", ExpiresAt: time.Now().Add(time.Minute)})
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := c.heartbeat(ctx, pkOwners, owner(id), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.heartbeat(ctx, pkOwners, owner("d"), 3); !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("a 4th record in a registry of 3: %v, want ErrLimitExceeded", err)
	}
	if err := c.heartbeat(ctx, pkOwners, owner("b"), 3); err != nil {
		t.Fatalf("renewal in a full registry: %v", err)
	}
	if _, err := c.queryAll(ctx, pkOwners, 2); !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("listing 3 records with a bound of 2: %v, want ErrLimitExceeded", err)
	}
	if n, err := c.count(ctx, pkOwners, 100); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}
}
