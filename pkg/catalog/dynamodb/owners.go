package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getOwner reads an owner's heartbeat item.
func (c *store) getOwner(ctx context.Context, id string) (catalog.Owner, bool, error) {
	it, err := c.get(ctx, pkOwners, id)
	if err != nil || it == nil {
		return catalog.Owner{}, false, err
	}
	o, err := decodeOwner(it)
	return o, err == nil, err
}

// HeartbeatOwner implements catalog.Owners: one put per heartbeat.
func (c *store) HeartbeatOwner(ctx context.Context, id, address string, ttl time.Duration) (catalog.Owner, error) {
	o := catalog.Owner{ID: id, Address: address, ExpiresAt: catalog.Timestamp(c.clock.Now().Add(ttl))}
	if err := c.heartbeat(ctx, pkOwners, ownerItem(o), catalog.MaxOwners); err != nil {
		return catalog.Owner{}, fmt.Errorf("heartbeat owner %q: %w", id, err)
	}
	return o, nil
}

// heartbeat renews a registry item, or adds it if the registry has room.
// The room check counts before adding, so racing first heartbeats of new
// ids can overshoot the bound by the number of racers; listing still stops
// at the bound (ErrLimitExceeded), so nothing grows unbounded unnoticed.
func (c *store) heartbeat(ctx context.Context, pk string, it map[string]av, max int) error {
	err := c.putIf(ctx, it, exists) // the common case: a renewal, one write
	if !errors.Is(err, errCondition) {
		return err
	}
	count, err := c.count(ctx, pk, max)
	if err != nil {
		return err
	}
	if count >= max {
		return fmt.Errorf("%d records: %w", count, catalog.ErrLimitExceeded)
	}
	_, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &c.table, Item: it})
	return err
}

// count counts the items under pk, reading at most max+1 of them.
func (c *store) count(ctx context.Context, pk string, max int) (int, error) {
	in := &dynamodb.QueryInput{
		TableName: &c.table, ConsistentRead: aws.Bool(true), Select: types.SelectCount,
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]av{":pk": s(pk)},
	}
	total := 0
	for {
		in.Limit = aws.Int32(int32(max + 1 - total))
		out, err := c.api.Query(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", pk, err)
		}
		total += int(out.Count)
		if out.LastEvaluatedKey == nil || total > max {
			return total, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// GetOwner implements catalog.Owners.
func (c *store) GetOwner(ctx context.Context, id string) (catalog.Owner, error) {
	o, found, err := c.getOwner(ctx, id)
	if err == nil && !found {
		err = catalog.ErrNotFound
	}
	if err != nil {
		return catalog.Owner{}, fmt.Errorf("get owner %q: %w", id, err)
	}
	return o, nil
}

// ListLiveOwners implements catalog.Owners.
func (c *store) ListLiveOwners(ctx context.Context) ([]catalog.Owner, error) {
	items, err := c.queryAll(ctx, pkOwners, catalog.MaxOwners)
	if err != nil {
		return nil, fmt.Errorf("list live owners: %w", err)
	}
	now := c.clock.Now()
	var live []catalog.Owner
	for _, it := range items {
		o, err := decodeOwner(it)
		if err != nil {
			return nil, fmt.Errorf("list live owners: %w", err)
		}
		if o.LiveAt(now) {
			live = append(live, o)
		}
	}
	return live, nil
}

// RemoveOwner implements catalog.Owners.
func (c *store) RemoveOwner(ctx context.Context, id string) error {
	err := c.deleteIf(ctx, pkOwners, id, exists)
	if errors.Is(err, errCondition) {
		err = catalog.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("remove owner %q: %w", id, err)
	}
	return nil
}
