package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// newTopicID returns a random 128-bit id: unique without a counter item
// that every topic creation would contend on.
func newTopicID() catalog.TopicID {
	var bs [16]byte
	_, _ = rand.Read(bs[:]) // crypto/rand.Read never fails (Go 1.24+)
	return catalog.TopicID(hex.EncodeToString(bs[:]))
}

// CreateTopic implements catalog.Topics: one conditional put.
func (c *store) CreateTopic(ctx context.Context, name string, partitions int, cfg catalog.TopicConfig) (catalog.Topic, error) {
	t := catalog.Topic{Name: name, ID: newTopicID(), Partitions: partitions, Config: cfg, CreatedAt: c.now(), Version: 1}
	err := c.putIf(ctx, topicItem(pkTopics, name, t), notExists)
	if errors.Is(err, errCondition) {
		err = catalog.ErrAlreadyExists
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("create topic %q: %w", name, err)
	}
	return t, nil
}

// getTopic reads a live topic: ErrNotFound if there is none.
func (c *store) getTopic(ctx context.Context, name string) (catalog.Topic, error) {
	it, err := c.get(ctx, pkTopics, name)
	if err != nil {
		return catalog.Topic{}, err
	}
	if it == nil {
		return catalog.Topic{}, catalog.ErrNotFound
	}
	return decodeTopic(it)
}

// GetTopic implements catalog.Topics.
func (c *store) GetTopic(ctx context.Context, name string) (catalog.Topic, error) {
	t, err := c.getTopic(ctx, name)
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("get topic %q: %w", name, err)
	}
	return t, nil
}

// ListTopics implements catalog.Topics: a query of the topics item
// collection, which DynamoDB keeps in name (sort-key) order.
func (c *store) ListTopics(ctx context.Context, pageToken string, limit int) (catalog.Page[catalog.Topic], error) {
	return c.listTopics(ctx, pkTopics, pageToken, limit)
}

// ListDeletedTopics implements catalog.DeletedTopics.
func (c *store) ListDeletedTopics(ctx context.Context, pageToken string, limit int) (catalog.Page[catalog.Topic], error) {
	return c.listTopics(ctx, pkDeletedTopics, pageToken, limit)
}

func (c *store) listTopics(ctx context.Context, pk, token string, limit int) (catalog.Page[catalog.Topic], error) {
	items, next, err := c.queryPage(ctx, pk, token, limit)
	if err != nil {
		return catalog.Page[catalog.Topic]{}, fmt.Errorf("list topics: %w", err)
	}
	page := catalog.Page[catalog.Topic]{NextPageToken: next}
	for _, it := range items {
		t, err := decodeTopic(it)
		if err != nil {
			return catalog.Page[catalog.Topic]{}, fmt.Errorf("list topics: %w", err)
		}
		page.Items = append(page.Items, t)
	}
	return page, nil
}

// UpdateTopicConfig implements catalog.Topics.
func (c *store) UpdateTopicConfig(ctx context.Context, name string, cfg catalog.TopicConfig, expectVersion int64) (catalog.Topic, error) {
	return c.casTopic(ctx, name, expectVersion, "update topic config", func(t *catalog.Topic) error {
		t.Config = cfg
		return nil
	})
}

// AddPartitions implements catalog.Topics. New partitions need no items:
// a partition's item is written when it is first acquired.
func (c *store) AddPartitions(ctx context.Context, name string, newCount int, expectVersion int64) (catalog.Topic, error) {
	return c.casTopic(ctx, name, expectVersion, "add partitions", func(t *catalog.Topic) error {
		if err := catalog.CheckAddPartitions(*t, newCount); err != nil {
			return err
		}
		t.Partitions = newCount
		return nil
	})
}

// casTopic reads the topic, applies change, and writes it back conditioned
// on the version the caller expected (which is the one read).
func (c *store) casTopic(ctx context.Context, name string, expectVersion int64, op string, change func(*catalog.Topic) error) (catalog.Topic, error) {
	t, err := c.getTopic(ctx, name)
	if err == nil && t.Version != expectVersion {
		err = fmt.Errorf("at version %d, not %d: %w", t.Version, expectVersion, catalog.ErrVersionConflict)
	}
	if err == nil {
		err = change(&t)
	}
	if err == nil {
		t.Version++
		if err = c.putIf(ctx, topicItem(pkTopics, name, t), versionIs(expectVersion)); errors.Is(err, errCondition) {
			err = catalog.ErrVersionConflict
		}
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("%s of topic %q: %w", op, name, err)
	}
	return t, nil
}

// DeleteTopic implements catalog.Topics: one transaction deletes the live
// item (at the version read) and creates the deleted-topic item.
func (c *store) DeleteTopic(ctx context.Context, name string) (catalog.Topic, error) {
	for range casAttempts {
		t, err := c.getTopic(ctx, name)
		if err != nil {
			return catalog.Topic{}, fmt.Errorf("delete topic %q: %w", name, err)
		}
		v := versionIs(t.Version)
		t.DeletedAt = c.now()
		t.Version++
		err = c.transact(ctx, []txOp{
			c.txDelete(pkTopics, name, &v, catalog.ErrVersionConflict),
			c.txPut(topicItem(pkDeletedTopics, string(t.ID), t), notExists, catalog.ErrAlreadyExists),
		})
		if errors.Is(err, catalog.ErrVersionConflict) {
			continue // changed under us: decide again from a fresh read
		}
		if err != nil {
			return catalog.Topic{}, fmt.Errorf("delete topic %q: %w", name, err)
		}
		return t, nil
	}
	return catalog.Topic{}, fmt.Errorf("delete topic %q: %d attempts lost a race: %w", name, casAttempts, catalog.ErrVersionConflict)
}

// PurgeDeletedTopic implements catalog.DeletedTopics: partition items first
// (batch deletes, idempotent), the deleted-topic item last, so a crash half
// way leaves the topic listed and the purge can simply run again.
func (c *store) PurgeDeletedTopic(ctx context.Context, id catalog.TopicID) error {
	err := c.purgeDeletedTopic(ctx, id)
	if err != nil {
		return fmt.Errorf("purge deleted topic %s: %w", id, err)
	}
	return nil
}

func (c *store) purgeDeletedTopic(ctx context.Context, id catalog.TopicID) error {
	it, err := c.get(ctx, pkDeletedTopics, string(id))
	if err != nil {
		return err
	}
	if it == nil {
		return catalog.ErrNotFound
	}
	// Page through the partition items' keys only (a partition item can be
	// large), deleting each page as it comes: memory stays bounded.
	in := &dynamodb.QueryInput{
		TableName: &c.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ProjectionExpression:      aws.String("#pk, #sk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]av{":pk": s(partitionPK(id))},
		Limit:                     aws.Int32(25), // BatchWriteItem's limit
	}
	for pages := 0; ; pages++ {
		if pages > catalog.MaxPartitions/25+1 {
			return fmt.Errorf("more than %d partition items under %s", catalog.MaxPartitions, partitionPK(id))
		}
		out, err := c.api.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("query partitions: %w", err)
		}
		if len(out.Items) > 0 {
			reqs := make([]types.WriteRequest, len(out.Items))
			for i, p := range out.Items {
				reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(keyString(p, attrPK), keyString(p, attrSK))}}
			}
			if err := c.batchWrite(ctx, reqs); err != nil {
				return err
			}
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if err := c.deleteIf(ctx, pkDeletedTopics, string(id), exists); errors.Is(err, errCondition) {
		return catalog.ErrNotFound // purged concurrently
	} else if err != nil {
		return err
	}
	return nil
}

// batchWrite sends reqs, resending what DynamoDB leaves unprocessed (its
// partial throttling) with backoff, a bounded number of times.
func (c *store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	for attempt := 1; ; attempt++ {
		out, err := c.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{c.table: reqs}})
		if err != nil {
			return fmt.Errorf("batch write: %w", err)
		}
		if reqs = out.UnprocessedItems[c.table]; len(reqs) == 0 {
			return nil
		}
		if attempt >= c.policy.MaxAttempts {
			return fmt.Errorf("batch write: %d items still unprocessed after %d attempts", len(reqs), attempt)
		}
		if err := sleep(ctx, c.policy.delay(attempt)); err != nil {
			return err
		}
	}
}
