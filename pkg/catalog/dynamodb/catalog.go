package dynamodb

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// casAttempts bounds the read-decide-write loops of the calls that are
// fenced by epoch rather than by a caller's version (ReleaseWriter,
// AppendLedger, DeleteTopic): a concurrent change that leaves the caller's
// right intact (the compactor trimming the chain) costs a re-read, not a
// failure. A decision is re-made from a fresh read each time, never replayed.
const casAttempts = 8

// Options configures New.
type Options struct {
	// Table is the catalog table's name (required).
	Table string
	// Clock is read for heartbeat expiry and timestamps; default the wall clock.
	Clock catalog.Clock
	// Retry bounds the throttling retries; the zero value means the defaults.
	Retry RetryPolicy
}

// store is the DynamoDB catalog's driver. New wraps it in a
// *catalog.Catalog, which checks every argument before a method here runs;
// these methods only read, apply the catalog's rules to what they read, and
// write conditioned on it. Safe for concurrent use.
type store struct {
	api    API
	table  string
	clock  catalog.Clock
	policy RetryPolicy // also paces resending batch items DynamoDB left unprocessed
}

var _ catalog.Driver = (*store)(nil)

// New returns a catalog over client (build it with NewClient, so the
// SDK does not retry on its own) in opts.Table. It wraps client with the
// throttling retries; it does not touch the table (see EnsureTable).
func New(client API, opts Options) (*catalog.Catalog, error) {
	s, err := newStore(client, opts)
	if err != nil {
		return nil, err
	}
	return catalog.New(s), nil
}

// newStore builds the driver alone; New is what callers get.
func newStore(client API, opts Options) (*store, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("dynamodb catalog: nil client"))
	}
	if err := validateTableName(opts.Table); err != nil {
		errs = append(errs, err)
	}
	retrying, err := NewRetrying(client, opts.Retry)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = catalog.SystemClock{}
	}
	return &store{api: retrying, table: opts.Table, clock: opts.Clock, policy: retrying.policy}, nil
}

// Close implements catalog.Driver: the client holds nothing to release.
func (c *store) Close() error { return nil }

func (c *store) now() time.Time { return catalog.Timestamp(c.clock.Now()) }

// get reads one item with a strongly consistent read: every read here
// either precedes a conditional write or backs a Get the caller expects to
// reflect its own writes. nil means no such item.
func (c *store) get(ctx context.Context, pk, sk string) (map[string]av, error) {
	out, err := c.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", pk, sk, err)
	}
	return out.Item, nil
}

// cond is a condition expression with its placeholders. Attribute names
// always go through #placeholders: several of ours are reserved words.
type cond struct {
	expr   string
	names  map[string]string
	values map[string]av
}

var (
	notExists = cond{expr: "attribute_not_exists(#pk)", names: map[string]string{"#pk": attrPK}}
	exists    = cond{expr: "attribute_exists(#pk)", names: map[string]string{"#pk": attrPK}}
)

func versionIs(v int64) cond {
	return cond{expr: "#v = :v", names: map[string]string{"#v": attrVersion}, values: map[string]av{":v": n(v)}}
}

// and combines conditions; their placeholders must not collide.
func (a cond) and(b cond) cond {
	out := cond{expr: "(" + a.expr + ") AND (" + b.expr + ")", names: maps.Clone(a.names), values: maps.Clone(a.values)}
	if out.names == nil {
		out.names = map[string]string{}
	}
	maps.Copy(out.names, b.names)
	if len(b.values) > 0 && out.values == nil {
		out.values = map[string]av{}
	}
	maps.Copy(out.values, b.values)
	return out
}

// or combines conditions; their placeholders must not collide.
func (a cond) or(b cond) cond {
	out := a.and(b)
	out.expr = "(" + a.expr + ") OR (" + b.expr + ")"
	return out
}

func (a cond) exprValues() map[string]av {
	if len(a.values) == 0 {
		return nil
	}
	return a.values
}

// errCondition is a failed condition of a single-item write; callers map
// it to what the condition meant.
var errCondition = errors.New("condition failed")

func conditionErr(err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errCondition
	}
	return err
}

func (c *store) putIf(ctx context.Context, it map[string]av, k cond) error {
	_, err := c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &c.table, Item: it,
		ConditionExpression: &k.expr, ExpressionAttributeNames: k.names, ExpressionAttributeValues: k.exprValues()})
	return conditionErr(err)
}

func (c *store) deleteIf(ctx context.Context, pk, sk string, k cond) error {
	_, err := c.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &c.table, Key: key(pk, sk),
		ConditionExpression: &k.expr, ExpressionAttributeNames: k.names, ExpressionAttributeValues: k.exprValues()})
	return conditionErr(err)
}

// txOp is one item of a transaction and what it failing its condition means.
type txOp struct {
	item   types.TransactWriteItem
	onFail error
}

func (c *store) txPut(it map[string]av, k cond, onFail error) txOp {
	return txOp{item: types.TransactWriteItem{Put: &types.Put{TableName: &c.table, Item: it,
		ConditionExpression: &k.expr, ExpressionAttributeNames: k.names, ExpressionAttributeValues: k.exprValues()}}, onFail: onFail}
}

func (c *store) txPutAlways(it map[string]av) txOp {
	return txOp{item: types.TransactWriteItem{Put: &types.Put{TableName: &c.table, Item: it}}}
}

func (c *store) txDelete(pk, sk string, k *cond, onFail error) txOp {
	d := &types.Delete{TableName: &c.table, Key: key(pk, sk)}
	if k != nil {
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = &k.expr, k.names, k.exprValues()
	}
	return txOp{item: types.TransactWriteItem{Delete: d}, onFail: onFail}
}

func (c *store) txCheck(pk, sk string, k cond, onFail error) txOp {
	return txOp{item: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &c.table, Key: key(pk, sk),
		ConditionExpression: &k.expr, ExpressionAttributeNames: k.names, ExpressionAttributeValues: k.exprValues()}}, onFail: onFail}
}

// transact commits ops atomically (TransactWriteItems) and maps a
// cancellation to the typed error of the item whose condition failed.
func (c *store) transact(ctx context.Context, ops []txOp) error {
	items := make([]types.TransactWriteItem, len(ops))
	onFail := make([]error, len(ops))
	for i, op := range ops {
		items[i], onFail[i] = op.item, op.onFail
	}
	_, err := c.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return cancellationError(err, onFail)
}

// cancellationError maps a TransactionCanceledException to a catalog error:
// the first item whose condition failed decides (callers order items by
// which failure should win); a conflict with another in-flight transaction
// is a lost race, ErrVersionConflict. Anything else is returned as is.
func cancellationError(err error, onFail []error) error {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return err
	}
	conflict := false
	for i, r := range tc.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ConditionalCheckFailed":
			if i < len(onFail) && onFail[i] != nil {
				return fmt.Errorf("transaction item %d: %w", i, onFail[i])
			}
			return fmt.Errorf("transaction item %d failed an unconditional check: %w", i, err)
		case "TransactionConflict":
			conflict = true
		}
	}
	if conflict {
		return fmt.Errorf("transaction conflict: %w", catalog.ErrVersionConflict)
	}
	return err
}

// queryPage reads one page of the items under pk in sort-key order: at most
// limit items after the token's position, and the token of the next page
// ("" when none follows). It reads one item ahead to know.
func (c *store) queryPage(ctx context.Context, pk, token string, limit int) ([]map[string]av, string, error) {
	start, err := decodeToken(pk, token)
	if err != nil {
		return nil, "", err
	}
	var items []map[string]av
	var esk map[string]av
	if start != "" {
		esk = key(pk, start)
	}
	for {
		out, err := c.api.Query(ctx, &dynamodb.QueryInput{
			TableName: &c.table, ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
			ExpressionAttributeValues: map[string]av{":pk": s(pk)},
			ExclusiveStartKey:         esk,
			Limit:                     aws.Int32(int32(limit + 1 - len(items))),
		})
		if err != nil {
			return nil, "", fmt.Errorf("query %s: %w", pk, err)
		}
		items = append(items, out.Items...)
		if len(items) > limit {
			items = items[:limit]
			return items, encodeToken(pk, keyString(items[limit-1], attrSK)), nil
		}
		if out.LastEvaluatedKey == nil {
			return items, "", nil
		}
		esk = out.LastEvaluatedKey
	}
}

// queryAll reads every item under pk, failing with ErrLimitExceeded past max.
func (c *store) queryAll(ctx context.Context, pk string, max int) ([]map[string]av, error) {
	items, next, err := c.queryPage(ctx, pk, "", max)
	if err == nil && next != "" {
		err = fmt.Errorf("more than %d items under %s: %w", max, pk, catalog.ErrLimitExceeded)
	}
	return items, err
}

// Page tokens are "<pk>\n<last sort key>", base64url: opaque to callers and
// checked to belong to the listing they are handed back to.
func encodeToken(pk, sk string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pk + "\n" + sk))
}

func decodeToken(pk, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	if len(token) > catalog.MaxPageTokenLength {
		return "", catalog.Invalid("pageToken", "is %d bytes, more than %d", len(token), catalog.MaxPageTokenLength)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	sk, ok := strings.CutPrefix(string(raw), pk+"\n")
	if err != nil || !ok || sk == "" {
		return "", catalog.Invalid("pageToken", "is not a token of this listing")
	}
	return sk, nil
}
