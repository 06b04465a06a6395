package dynamodb

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getLedger reads a ledger's item: ErrNotFound if there is none.
func (c *store) getLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	it, err := c.get(ctx, ledgerPK(id), skLedger)
	if err != nil {
		return catalog.LedgerMetadata{}, err
	}
	if it == nil {
		return catalog.LedgerMetadata{}, catalog.ErrNotFound
	}
	m, err := decodeLedger(it)
	if err == nil && m.ID != id {
		err = fmt.Errorf("%w: item %s holds ledger %d", ErrCorrupt, ledgerPK(id), m.ID)
	}
	return m, err
}

// nextLedgerID allocates an id: an atomic ADD on the counter item, which
// DynamoDB serializes, so no two callers ever get the same id.
func (c *store) nextLedgerID(ctx context.Context) (catalog.LedgerID, error) {
	out, err := c.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(pkCounters, skLedgerCounter),
		UpdateExpression:          aws.String("ADD #last :one SET #fv = :fv"),
		ExpressionAttributeNames:  map[string]string{"#last": "last", "#fv": attrFormat},
		ExpressionAttributeValues: map[string]av{":one": n(1), ":fv": n(formatVersion)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("allocate ledger id: %w", err)
	}
	r := &reader{item: out.Attributes}
	id := r.num("last")
	if err := r.err(); err != nil {
		return 0, err
	}
	return catalog.LedgerID(id), nil
}

// CreateLedger implements catalog.Ledgers: allocate an id, then write the
// ledger item and both index items in one transaction.
func (c *store) CreateLedger(ctx context.Context, spec catalog.LedgerSpec) (catalog.LedgerMetadata, error) {
	id, err := c.nextLedgerID(ctx)
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("create ledger for %s/%d: %w", spec.Topic, spec.Partition, err)
	}
	m := catalog.NewLedger(spec, id, c.clock.Now())
	// An existing item under a fresh id means the counter went backwards
	// (a restored table?); refuse rather than overwrite a ledger.
	reused := fmt.Errorf("%w: ledger id %d allocated twice", ErrCorrupt, id)
	err = c.transact(ctx, []txOp{
		c.txPut(ledgerItem(m), notExists, reused),
		c.txPutAlways(item(byPartitionPK(m.TopicID, m.Partition), idSK(m.ID))),
		c.txPutAlways(item(byStatePK(m.State), idSK(m.ID))),
	})
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("create ledger %d for %s/%d: %w", id, spec.Topic, spec.Partition, err)
	}
	return m, nil
}

// GetLedger implements catalog.Ledgers.
func (c *store) GetLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	m, err := c.getLedger(ctx, id)
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("get ledger %d: %w", id, err)
	}
	return m, nil
}

// GetLedgers implements catalog.Ledgers with BatchGetItem (100 keys per
// request).
func (c *store) GetLedgers(ctx context.Context, ids []catalog.LedgerID) ([]catalog.LedgerMetadata, error) {
	ms, err := c.batchGetLedgers(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("get %d ledgers: %w", len(ids), err)
	}
	return ms, nil
}

// UpdateLedger implements catalog.Ledgers: the proposal is checked against
// the item read, and written conditioned on that item's version — so the
// check was made on exactly what is replaced. A state change moves the
// by-state index item in the same transaction.
func (c *store) UpdateLedger(ctx context.Context, proposed catalog.LedgerMetadata) (catalog.LedgerMetadata, error) {
	old, err := c.getLedger(ctx, proposed.ID)
	var next catalog.LedgerMetadata
	if err == nil {
		next, err = catalog.NextLedger(old, proposed, c.clock.Now())
	}
	if err == nil {
		ops := []txOp{c.txPut(ledgerItem(next), versionIs(old.Version), catalog.ErrVersionConflict)}
		if next.State != old.State {
			ops = append(ops,
				c.txDelete(byStatePK(old.State), idSK(old.ID), nil, nil),
				c.txPutAlways(item(byStatePK(next.State), idSK(next.ID))))
		}
		err = c.transact(ctx, ops)
	}
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("update ledger %d: %w", proposed.ID, err)
	}
	return next, nil
}

// DeleteLedgerMetadata implements catalog.Ledgers.
func (c *store) DeleteLedgerMetadata(ctx context.Context, id catalog.LedgerID, expectVersion int64) error {
	m, err := c.getLedger(ctx, id)
	if err == nil {
		err = catalog.CheckDeletable(m, expectVersion)
	}
	if err == nil {
		v := versionIs(expectVersion)
		err = c.transact(ctx, []txOp{
			c.txDelete(ledgerPK(id), skLedger, &v, catalog.ErrVersionConflict),
			c.txDelete(byPartitionPK(m.TopicID, m.Partition), idSK(id), nil, nil),
			c.txDelete(byStatePK(m.State), idSK(id), nil, nil),
		})
	}
	if err != nil {
		return fmt.Errorf("delete ledger metadata %d: %w", id, err)
	}
	return nil
}

// ListLedgersByPartition implements catalog.LedgerLister.
func (c *store) ListLedgersByPartition(ctx context.Context, topicID catalog.TopicID, partition int, pageToken string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return c.listLedgers(ctx, byPartitionPK(topicID, partition), pageToken, limit, func(m catalog.LedgerMetadata) bool {
		return m.TopicID == topicID && m.Partition == partition
	})
}

// ListLedgersByState implements catalog.LedgerLister.
func (c *store) ListLedgersByState(ctx context.Context, state catalog.LedgerState, pageToken string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return c.listLedgers(ctx, byStatePK(state), pageToken, limit, func(m catalog.LedgerMetadata) bool { return m.State == state })
}

// listLedgers pages through an index item collection and batch-reads the
// ledgers it names. The index and the ledgers are read at slightly
// different moments, so a ledger deleted or moved to another state in
// between is left out (keep says whether a ledger still belongs).
func (c *store) listLedgers(ctx context.Context, pk, token string, limit int, keep func(catalog.LedgerMetadata) bool) (catalog.Page[catalog.LedgerMetadata], error) {
	idx, next, err := c.queryPage(ctx, pk, token, limit)
	if err != nil {
		return catalog.Page[catalog.LedgerMetadata]{}, fmt.Errorf("list ledgers: %w", err)
	}
	ids := make([]catalog.LedgerID, len(idx))
	for i, it := range idx {
		v, err := strconv.ParseInt(keyString(it, attrSK), 10, 64)
		if err != nil {
			return catalog.Page[catalog.LedgerMetadata]{}, fmt.Errorf("%w: index item %s/%s", ErrCorrupt, pk, keyString(it, attrSK))
		}
		ids[i] = catalog.LedgerID(v)
	}
	got, err := c.batchGetLedgers(ctx, ids)
	if err != nil {
		return catalog.Page[catalog.LedgerMetadata]{}, fmt.Errorf("list ledgers: %w", err)
	}
	page := catalog.Page[catalog.LedgerMetadata]{NextPageToken: next}
	for _, m := range got {
		if keep(m) {
			page.Items = append(page.Items, m)
		}
	}
	return page, nil
}

// batchGetLedgers reads ledgers by id (consistently, 100 per request,
// resending unprocessed keys with bounded backoff) and returns those that
// exist, in id order.
func (c *store) batchGetLedgers(ctx context.Context, ids []catalog.LedgerID) ([]catalog.LedgerMetadata, error) {
	var out []catalog.LedgerMetadata
	for len(ids) > 0 {
		chunk := ids[:min(100, len(ids))] // BatchGetItem's limit
		ids = ids[len(chunk):]
		keys := make([]map[string]av, len(chunk))
		for i, id := range chunk {
			keys[i] = key(ledgerPK(id), skLedger)
		}
		for attempt := 1; len(keys) > 0; attempt++ {
			res, err := c.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				c.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return nil, fmt.Errorf("batch get ledgers: %w", err)
			}
			for _, it := range res.Responses[c.table] {
				m, err := decodeLedger(it)
				if err != nil {
					return nil, err
				}
				out = append(out, m)
			}
			keys = res.UnprocessedKeys[c.table].Keys
			if len(keys) == 0 {
				break
			}
			if attempt >= c.policy.MaxAttempts {
				return nil, fmt.Errorf("batch get ledgers: %d keys still unprocessed after %d attempts", len(keys), attempt)
			}
			if err := sleep(ctx, c.policy.delay(attempt)); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(out, func(a, b catalog.LedgerMetadata) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
