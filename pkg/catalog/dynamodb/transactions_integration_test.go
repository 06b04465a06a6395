//go:build integration

package dynamodb

// The catalog's correctness rests on TransactWriteItems being all or
// nothing. These tests check that on the endpoint itself, with raw API
// calls: they hold for DynamoDB, and they pin the two fixes
// localstack/moto/serve.py makes to moto (an undo log instead of whole-table
// copies; one DynamoDB request at a time).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/internal/testenv"
)

// rawTable creates a fresh table with the catalog's key schema and returns a
// client that does not retry, so any failed request is seen.
func rawTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	cfg := testenv.AWSConfig(t, testenv.AWSEndpoint(t))
	cfg.RetryMaxAttempts = 1
	client := NewClient(cfg)
	table := fmt.Sprintf("sluice-tx-test-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.CreateTable(ctx, TableDefinition(table)); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return client, table
}

func txKey(pk, sk string) map[string]av {
	return map[string]av{attrPK: s(pk), attrSK: s(sk)}
}

func txItem(pk, sk string, v int64) map[string]av {
	it := txKey(pk, sk)
	it["v"] = n(v)
	return it
}

// getV returns item (pk, sk)'s "v", or -1 when the item does not exist.
func getV(t *testing.T, client *dynamodb.Client, table, pk, sk string) int64 {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: txKey(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem %s/%s: %v", pk, sk, err)
	}
	if out.Item == nil {
		return -1
	}
	v, err := strconv.ParseInt(out.Item["v"].(*types.AttributeValueMemberN).Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func put(t *testing.T, client *dynamodb.Client, table string, item map[string]av) {
	t.Helper()
	if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
}

func TestIntegrationDynamoDBTransactions(t *testing.T) {
	client, table := rawTable(t)
	ctx := t.Context()
	tbl := aws.String(table)
	setV := func(pk, sk string, v int64) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			TableName: tbl, Key: txKey(pk, sk), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]av{":v": n(v)},
		}}
	}

	t.Run("cancelled transaction writes nothing", func(t *testing.T) {
		put(t, client, table, txItem("c", "updated", 1))
		put(t, client, table, txItem("c", "deleted", 1))
		put(t, client, table, txItem("c", "guard", 7))
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: tbl, Item: txItem("c", "new", 1)}},
			setV("c", "updated", 2),
			{Delete: &types.Delete{TableName: tbl, Key: txKey("c", "deleted")}},
			{ConditionCheck: &types.ConditionCheck{
				TableName: tbl, Key: txKey("c", "guard"), ConditionExpression: aws.String("v = :want"),
				ExpressionAttributeValues:           map[string]av{":want": n(8)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
		}})
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			t.Fatalf("want TransactionCanceledException, got %v", err)
		}
		var codes []string
		for _, r := range canceled.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if want := "[None None None ConditionalCheckFailed]"; fmt.Sprint(codes) != want {
			t.Errorf("cancellation reasons %v, want %s", codes, want)
		}
		if len(canceled.CancellationReasons) == 4 {
			if old := canceled.CancellationReasons[3].Item; old == nil || old["v"].(*types.AttributeValueMemberN).Value != "7" {
				t.Errorf("ALL_OLD item of the failed check = %v, want the guard item with v=7", old)
			}
		}
		for _, c := range []struct {
			sk   string
			want int64
		}{{"new", -1}, {"updated", 1}, {"deleted", 1}, {"guard", 7}} {
			if got := getV(t, client, table, "c", c.sk); got != c.want {
				t.Errorf("after the cancelled transaction c/%s v = %d, want %d", c.sk, got, c.want)
			}
		}
	})

	t.Run("failed update after a put undoes the put", func(t *testing.T) {
		put(t, client, table, txItem("u", "text", 0))
		// "v" becomes a string, then ADD to it fails.
		if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: tbl, Key: txKey("u", "text"), UpdateExpression: aws.String("SET w = :w"),
			ExpressionAttributeValues: map[string]av{":w": s("text")},
		}); err != nil {
			t.Fatal(err)
		}
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: tbl, Item: txItem("u", "new", 1)}},
			{Update: &types.Update{
				TableName: tbl, Key: txKey("u", "text"), UpdateExpression: aws.String("ADD w :one"),
				ExpressionAttributeValues: map[string]av{":one": n(1)},
			}},
		}})
		if err == nil {
			t.Fatal("ADD to a string attribute succeeded")
		}
		if got := getV(t, client, table, "u", "new"); got != -1 {
			t.Errorf("the put before the failed update is there (v=%d)", got)
		}
	})

	t.Run("two actions on one item are refused", func(t *testing.T) {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: tbl, Item: txItem("d", "first", 1)}},
			{Put: &types.Put{TableName: tbl, Item: txItem("d", "twice", 1)}},
			setV("d", "twice", 2),
		}})
		if err == nil {
			t.Fatal("a transaction with two actions on d/twice succeeded")
		}
		if got := getV(t, client, table, "d", "first"); got != -1 {
			t.Errorf("d/first was written by a refused transaction (v=%d)", got)
		}
	})

	t.Run("committed transaction writes everything", func(t *testing.T) {
		put(t, client, table, txItem("ok", "updated", 1))
		put(t, client, table, txItem("ok", "deleted", 1))
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: tbl, Item: txItem("ok", "new", 1), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			setV("ok", "updated", 2),
			{Delete: &types.Delete{TableName: tbl, Key: txKey("ok", "deleted")}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			sk   string
			want int64
		}{{"new", 1}, {"updated", 2}, {"deleted", -1}} {
			if got := getV(t, client, table, "ok", c.sk); got != c.want {
				t.Errorf("ok/%s v = %d, want %d", c.sk, got, c.want)
			}
		}
	})
}

// TestIntegrationDynamoDBConcurrentRequests: writers commit and cancel
// transactions while readers query the same partition, all at once, with no
// client-side serialization and no retries. Every request must get a proper
// answer (moto without serve.py's lock answered some with HTTP 500), every
// committed write must stay (a cancelled transaction must not restore
// anything over another request's write), and no cancelled write may appear.
func TestIntegrationDynamoDBConcurrentRequests(t *testing.T) {
	client, table := rawTable(t)
	ctx := t.Context()
	tbl := aws.String(table)
	const writers, perWriter, readers = 6, 40, 2

	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter+readers)
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				sk := fmt.Sprintf("w%d-%03d", w, i)
				items := []types.TransactWriteItem{
					{Put: &types.Put{TableName: tbl, Item: txItem("p", sk, int64(i))}},
					{Put: &types.Put{TableName: tbl, Item: txItem("p", sk+"-pair", int64(i))}},
				}
				cancel := i%4 == 3
				if cancel { // a check that always fails: the whole transaction is cancelled
					items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
						TableName: tbl, Key: txKey("p", "never"), ConditionExpression: aws.String("attribute_exists(pk)"),
					}})
				}
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
				var canceled *types.TransactionCanceledException
				switch {
				case cancel && !errors.As(err, &canceled):
					errs <- fmt.Errorf("writer %d item %d: want a cancellation, got %v", w, i, err)
				case !cancel && err != nil:
					errs <- fmt.Errorf("writer %d item %d: %w", w, i, err)
				}
			}
		})
	}
	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				in := &dynamodb.QueryInput{
					TableName: tbl, KeyConditionExpression: aws.String("pk = :pk"),
					ExpressionAttributeValues: map[string]av{":pk": s("p")}, ConsistentRead: aws.Bool(true),
				}
				if _, err := client.Query(ctx, in); err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 5 {
			t.Error(err)
		}
	}
	if failed > 5 {
		t.Errorf("... and %d more failed requests", failed-5)
	}

	got := map[string]bool{}
	in := &dynamodb.QueryInput{
		TableName: tbl, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]av{":pk": s("p")}, ConsistentRead: aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			got[it[attrSK].(*types.AttributeValueMemberS).Value] = true
		}
	}
	missing, extra := 0, 0
	for w := range writers {
		for i := range perWriter {
			sk := fmt.Sprintf("w%d-%03d", w, i)
			want := i%4 != 3
			for _, k := range []string{sk, sk + "-pair"} {
				switch {
				case want && !got[k]:
					missing++
				case !want && got[k]:
					extra++
				}
			}
		}
	}
	if missing > 0 || extra > 0 {
		t.Errorf("after %d transactions: %d committed items missing, %d items of cancelled transactions present", writers*perWriter, missing, extra)
	}
}
