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
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicemq/sluice/harness/testenv"
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
	var out *dynamodb.GetItemOutput
	err := unlessDropped(t, "GetItem", func() (err error) {
		out, err = client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: txKey(pk, sk), ConsistentRead: aws.Bool(true)})
		return err
	})
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
	err := unlessDropped(t, "PutItem", func() error {
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item})
		return err
	})
	if err != nil {
		t.Fatalf("PutItem: %v", err)
	}
}

// unlessDropped runs an idempotent call (an unconditional put, a read) up to
// three times while it fails in transit: a dropped connection or an answer
// that could not be read. Once in a CI run a PutItem answer's body was lost
// under load (the SDK saw a closed connection and checksum 0). Every answer
// the emulator gives, a 5xx above all (what serve.py's serialization
// fixed), is returned at once.
func unlessDropped(t *testing.T, what string, call func() error) error {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := call()
		var re *smithyhttp.ResponseError
		answered := errors.As(err, &re) && re.HTTPStatusCode() >= 300
		if err == nil || answered || !IsTransient(err) || attempt == 3 {
			return err
		}
		t.Logf("%s attempt %d failed in transit, sending it again: %v", what, attempt, err)
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

// TestIntegrationDynamoDBQuery: a Query returns its hash key's items only,
// in range-key order (reversed on request), with range conditions and
// paging, and every attribute type as written. Pins serve.py's fixes 3 and
// 4 (Query looks at the hash key's items only; answers written as JSON).
func TestIntegrationDynamoDBQuery(t *testing.T) {
	client, table := rawTable(t)
	ctx := t.Context()
	for pk, count := range map[string]int{"a": 250, "b": 10, "c": 3} {
		for i := range count {
			it := txItem(pk, fmt.Sprintf("%04d", i), int64(i))
			it["bin"] = &types.AttributeValueMemberB{Value: []byte{0, byte(i), 0xff}}
			it["list"] = &types.AttributeValueMemberL{Value: []av{n(int64(i)), &types.AttributeValueMemberM{Value: map[string]av{"k": s(pk)}}}}
			it["flag"] = &types.AttributeValueMemberBOOL{Value: i%2 == 0}
			put(t, client, table, it)
		}
	}
	// Every attribute type the catalog stores comes back as written.
	out, err := client.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk AND sk = :sk"),
		ExpressionAttributeValues: map[string]av{":pk": s("b"), ":sk": s("0007")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 {
		t.Fatalf("query of b/0007: %d items", len(out.Items))
	}
	it := out.Items[0]
	if b := it["bin"].(*types.AttributeValueMemberB).Value; !slices.Equal(b, []byte{0, 7, 0xff}) {
		t.Errorf("binary attribute read back as %v", b)
	}
	if l := it["list"].(*types.AttributeValueMemberL).Value; len(l) != 2 || l[0].(*types.AttributeValueMemberN).Value != "7" ||
		l[1].(*types.AttributeValueMemberM).Value["k"].(*types.AttributeValueMemberS).Value != "b" {
		t.Errorf("list attribute read back as %#v", l)
	}
	if f := it["flag"].(*types.AttributeValueMemberBOOL).Value; f {
		t.Errorf("bool attribute read back as %v", f)
	}
	if aws.ToInt32(&out.Count) != 1 {
		t.Errorf("Count %d, want 1", out.Count)
	}
	query := func(pk string, between []string, limit int32, forward bool) []string {
		in := &dynamodb.QueryInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(forward),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]av{":pk": s(pk)},
		}
		if between != nil {
			in.KeyConditionExpression = aws.String("pk = :pk AND sk BETWEEN :a AND :b")
			in.ExpressionAttributeValues[":a"], in.ExpressionAttributeValues[":b"] = s(between[0]), s(between[1])
		}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		var got []string
		for p := dynamodb.NewQueryPaginator(client, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("Query %s: %v", pk, err)
			}
			for _, it := range page.Items {
				got = append(got, it[attrPK].(*types.AttributeValueMemberS).Value+"/"+it[attrSK].(*types.AttributeValueMemberS).Value)
			}
		}
		return got
	}
	want := func(pk string, from, to int, forward bool) []string {
		var w []string
		for i := from; i <= to; i++ {
			w = append(w, fmt.Sprintf("%s/%04d", pk, i))
		}
		if !forward {
			slices.Reverse(w)
		}
		return w
	}
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"all of b", query("b", nil, 0, true), want("b", 0, 9, true)},
		{"all of c, reversed", query("c", nil, 0, false), want("c", 0, 2, false)},
		{"a between 100 and 199 in pages of 30", query("a", []string{"0100", "0199"}, 30, true), want("a", 100, 199, true)},
		{"a reversed in pages of 64", query("a", nil, 64, false), want("a", 0, 249, false)},
		{"a missing key", query("zz", nil, 0, true), nil},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %d items %v, want %d items %v", c.name, len(c.got), head(c.got), len(c.want), head(c.want))
		}
	}
}

func head(items []string) []string { return items[:min(len(items), 5)] }
