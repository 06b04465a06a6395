//go:build integration

package dynamodb

// The request meter behind bench_integration_test.go, and the runner that
// reports it on top of harness/benchclients.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/harness/benchclients"
)

// benchClients are the client counts of the benchmarks where concurrency
// means something.
var benchClients = []int{1, 16}

type benchClient = benchclients.Client

// runClients runs op as a benchmark over clients goroutines (see
// benchclients.Run) and, with a meter, also reports per call:
//
//	requests/op       DynamoDB requests
//	rcu/op wcu/op     estimated capacity units, see meter
func runClients(b *testing.B, clients int, m *meter, op func(bc *benchClient) error) float64 {
	b.Helper()
	if m == nil {
		return benchclients.Run(b, clients, op)
	}
	return benchclients.Run(b, clients, op, func() func(n int) {
		before := m.counts()
		return func(n int) {
			d := m.counts().sub(before)
			b.ReportMetric(float64(d.requests)/float64(n), "requests/op")
			b.ReportMetric(float64(d.rcu)/float64(n), "rcu/op")
			b.ReportMetric(float64(d.wcu)/float64(n), "wcu/op")
		}
	})
}

// meter wraps the DynamoDB client, counting requests and estimating the
// capacity units DynamoDB would charge for them, from the sizes of the items
// sent and received and DynamoDB's documented rules: item size = attribute
// names + values (itemSize); a strongly consistent read costs 1 RCU per 4 KB
// (a Query: of the items returned, summed), a write 1 WCU per 1 KB, every
// item of a TransactWriteItems twice that. What the client cannot see is
// assumed small: a ConditionCheck or Delete inside a transaction is counted
// as a 1 KB transactional write (2 WCU), an UpdateItem (the ledger id
// counter) as 1 WCU, a COUNT query as 1 RCU. A write is charged for the
// larger of the old and new item; the new one is what is counted here, and
// the items the benchmarks rewrite keep their size. Capacity is counted
// whether the request succeeded or failed its condition, as DynamoDB does.
type meter struct {
	next               API
	requests, rcu, wcu atomic.Int64
}

var _ API = (*meter)(nil)

type meterCounts struct{ requests, rcu, wcu int64 }

func (c meterCounts) sub(o meterCounts) meterCounts {
	return meterCounts{c.requests - o.requests, c.rcu - o.rcu, c.wcu - o.wcu}
}

func (m *meter) counts() meterCounts {
	return meterCounts{m.requests.Load(), m.rcu.Load(), m.wcu.Load()}
}

func (m *meter) charge(rcu, wcu int) {
	m.requests.Add(1)
	m.rcu.Add(int64(rcu))
	m.wcu.Add(int64(wcu))
}

func readUnits(size int) int  { return max(1, (size+4095)/4096) }
func writeUnits(size int) int { return max(1, (size+1023)/1024) }

// itemSize is an item's size by DynamoDB's rules ("Item sizes and formats"
// in the DynamoDB developer guide).
func itemSize(it map[string]av) int {
	size := 0
	for name, v := range it {
		size += len(name) + attrSize(v)
	}
	return size
}

func attrSize(v av) int {
	size := 0
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		size = len(v.Value)
	case *types.AttributeValueMemberN:
		size = numberSize(v.Value)
	case *types.AttributeValueMemberB:
		size = len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		size = 1
	case *types.AttributeValueMemberL:
		size = 3
		for _, e := range v.Value {
			size += 1 + attrSize(e)
		}
	case *types.AttributeValueMemberM:
		size = 3
		for k, e := range v.Value {
			size += 1 + len(k) + attrSize(e)
		}
	case *types.AttributeValueMemberSS:
		for _, e := range v.Value {
			size += len(e)
		}
	case *types.AttributeValueMemberNS:
		for _, e := range v.Value {
			size += numberSize(e)
		}
	case *types.AttributeValueMemberBS:
		for _, e := range v.Value {
			size += len(e)
		}
	}
	return size
}

// numberSize: 1 byte per two significant digits, plus 1.
func numberSize(num string) int {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, num)
	digits = strings.TrimRight(strings.TrimLeft(digits, "0"), "0")
	return (len(digits)+1)/2 + 1
}

// GetItem implements API.
func (m *meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.next.GetItem(ctx, in, o...)
	size := 0
	if out != nil {
		size = itemSize(out.Item)
	}
	m.charge(readUnits(size), 0)
	return out, err
}

// PutItem implements API.
func (m *meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.charge(0, writeUnits(itemSize(in.Item)))
	return m.next.PutItem(ctx, in, o...)
}

// UpdateItem implements API.
func (m *meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.charge(0, 1)
	return m.next.UpdateItem(ctx, in, o...)
}

// DeleteItem implements API.
func (m *meter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	m.charge(0, 1)
	return m.next.DeleteItem(ctx, in, o...)
}

// Query implements API.
func (m *meter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.next.Query(ctx, in, o...)
	size := 0
	if out != nil {
		for _, it := range out.Items {
			size += itemSize(it)
		}
	}
	m.charge(readUnits(size), 0)
	return out, err
}

// BatchGetItem implements API.
func (m *meter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := m.next.BatchGetItem(ctx, in, o...)
	rcu := 0
	if out != nil {
		for _, items := range out.Responses {
			for _, it := range items {
				rcu += readUnits(itemSize(it))
			}
		}
	}
	m.charge(rcu, 0)
	return out, err
}

// BatchWriteItem implements API.
func (m *meter) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	wcu := 0
	for _, reqs := range in.RequestItems {
		for _, r := range reqs {
			if r.PutRequest != nil {
				wcu += writeUnits(itemSize(r.PutRequest.Item))
			} else {
				wcu++
			}
		}
	}
	m.charge(0, wcu)
	return m.next.BatchWriteItem(ctx, in, o...)
}

// TransactWriteItems implements API.
func (m *meter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	wcu := 0
	for _, it := range in.TransactItems {
		if it.Put != nil {
			wcu += 2 * writeUnits(itemSize(it.Put.Item))
		} else {
			wcu += 2 // ConditionCheck, Delete, Update of a small item
		}
	}
	m.charge(0, wcu)
	return m.next.TransactWriteItems(ctx, in, o...)
}

// CreateTable implements API (control plane: not counted).
func (m *meter) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return m.next.CreateTable(ctx, in, o...)
}

// DescribeTable implements API (control plane: not counted).
func (m *meter) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return m.next.DescribeTable(ctx, in, o...)
}
