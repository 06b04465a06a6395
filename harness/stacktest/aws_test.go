//go:build integration

package stacktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/harness/testenv"
)

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

func TestIntegrationS3PutRangedGetListConditionalPut(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AWSConfig(t, testenv.AWSEndpoint(t))
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := uniqueName("sluice-smoke")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}

	body := []byte("0123456789abcdefghij")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("seg/0001"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put: %v", err)
	}

	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("seg/0001"), Range: aws.String("bytes=5-9")})
	if err != nil {
		t.Fatalf("ranged get: %v", err)
	}
	part, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(part) != "56789" {
		t.Fatalf("ranged get returned %q, want %q", part, "56789")
	}

	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("seg/")})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "seg/0001" || aws.ToInt64(list.Contents[0].Size) != int64(len(body)) {
		t.Fatalf("list = %+v", list.Contents)
	}

	// Conditional create: If-None-Match "*" must refuse to overwrite.
	put := func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("seg/0002"), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	var apiErr smithy.APIError
	if err := put(); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("second conditional put: err = %v, want PreconditionFailed", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("seg/0002")}); err != nil {
		t.Fatalf("head after conditional put: %v", err)
	}
	var nsk *s3types.NoSuchKey
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("seg/missing")}); !errors.As(err, &nsk) {
		t.Fatalf("get of a missing key: err = %v, want NoSuchKey", err)
	}
}

func TestIntegrationDynamoDBConditionalWritesAndTransactions(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AWSConfig(t, testenv.AWSEndpoint(t))
	c := dynamodb.NewFromConfig(cfg)
	table := uniqueName("sluice-smoke")
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})

	item := func(pk, sk string, version int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: pk},
			"sk": &ddbtypes.AttributeValueMemberS{Value: sk},
			"v":  &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(version)},
		}
	}
	create := func(pk string) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table), Item: item(pk, "meta", 1),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		return err
	}
	if err := create("topic#a"); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if err := create("topic#a"); !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: err = %v, want ConditionalCheckFailedException", err)
	}

	// Versioned CAS inside a transaction with a second item: all or nothing.
	casAndAdd := func(expectVersion int, newItem string) error {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{
				TableName: aws.String(table), Item: item("topic#a", "meta", expectVersion+1),
				ConditionExpression:       aws.String("v = :v"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(expectVersion)}},
			}},
			{Put: &ddbtypes.Put{
				TableName: aws.String(table), Item: item("topic#a", newItem, 1),
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}},
		}})
		return err
	}
	if err := casAndAdd(1, "ledger#1"); err != nil {
		t.Fatalf("transaction with current version: %v", err)
	}
	var canceled *ddbtypes.TransactionCanceledException
	if err := casAndAdd(1, "ledger#2"); !errors.As(err, &canceled) {
		t.Fatalf("transaction with stale version: err = %v, want TransactionCanceledException", err)
	}
	// The canceled transaction must not have written its second item.
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "topic#a"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "ledger#2"},
	}})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if out.Item != nil {
		t.Fatalf("a canceled transaction wrote %v", out.Item)
	}
	q, err := c.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: "topic#a"}},
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(q.Items) != 2 {
		t.Fatalf("query returned %d items, want meta + ledger#1", len(q.Items))
	}
}
