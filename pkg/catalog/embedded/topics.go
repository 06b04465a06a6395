package embedded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// newTopicID returns a random 128-bit id: unique without coordination, and
// never reused by a later topic of the same name.
func newTopicID() catalog.TopicID {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return catalog.TopicID(hex.EncodeToString(b[:]))
}

// CreateTopic implements catalog.Topics.
func (c *store) CreateTopic(_ context.Context, name string, partitions int, cfg catalog.TopicConfig) (catalog.Topic, error) {
	var t catalog.Topic
	err := c.write(func() error {
		var old topicRec
		found, err := c.get(topicKey(name), &old)
		if err != nil {
			return err
		}
		if found {
			return catalog.ErrAlreadyExists
		}
		t = catalog.Topic{Name: name, ID: newTopicID(), Partitions: partitions, Config: cfg, CreatedAt: c.now(), Version: 1}
		b := c.db.NewBatch()
		set(b, topicKey(name), toTopicRec(t))
		return c.commit(b)
	})
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("create topic %q: %w", name, err)
	}
	return t, nil
}

// getTopic reads a live topic; callers hold the lock.
func (c *store) getTopic(name string) (catalog.Topic, error) {
	var r topicRec
	key := topicKey(name)
	found, err := c.get(key, &r)
	if err != nil {
		return catalog.Topic{}, err
	}
	if !found {
		return catalog.Topic{}, catalog.ErrNotFound
	}
	t, err := r.topic()
	if err != nil {
		return catalog.Topic{}, corrupt(key, err)
	}
	return t, nil
}

// GetTopic implements catalog.Topics.
func (c *store) GetTopic(_ context.Context, name string) (catalog.Topic, error) {
	var t catalog.Topic
	err := c.read(func() (err error) { t, err = c.getTopic(name); return err })
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("get topic %q: %w", name, err)
	}
	return t, nil
}

// ListTopics implements catalog.Topics.
func (c *store) ListTopics(_ context.Context, pageToken string, limit int) (catalog.Page[catalog.Topic], error) {
	return c.listTopics(topicPrefix, pageToken, limit)
}

// ListDeletedTopics implements catalog.DeletedTopics.
func (c *store) ListDeletedTopics(_ context.Context, pageToken string, limit int) (catalog.Page[catalog.Topic], error) {
	return c.listTopics(deletedPrefix, pageToken, limit)
}

func (c *store) listTopics(prefix []byte, token string, limit int) (catalog.Page[catalog.Topic], error) {
	var page catalog.Page[catalog.Topic]
	err := c.read(func() (err error) {
		page.NextPageToken, err = c.scan(prefix, token, limit, func(k, v []byte) error {
			var r topicRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			t, err := r.topic()
			if err != nil {
				return corrupt(k, err)
			}
			page.Items = append(page.Items, t)
			return nil
		})
		return err
	})
	if err != nil {
		return catalog.Page[catalog.Topic]{}, fmt.Errorf("list topics: %w", err)
	}
	return page, nil
}

// UpdateTopicConfig implements catalog.Topics.
func (c *store) UpdateTopicConfig(_ context.Context, name string, cfg catalog.TopicConfig, expectVersion int64) (catalog.Topic, error) {
	return c.casTopic(name, expectVersion, "update topic config", func(t *catalog.Topic) error {
		t.Config = cfg
		return nil
	})
}

// AddPartitions implements catalog.Topics.
func (c *store) AddPartitions(_ context.Context, name string, newCount int, expectVersion int64) (catalog.Topic, error) {
	return c.casTopic(name, expectVersion, "add partitions", func(t *catalog.Topic) error {
		if err := catalog.CheckAddPartitions(*t, newCount); err != nil {
			return err
		}
		t.Partitions = newCount
		return nil
	})
}

// casTopic applies change to the topic if its version is expectVersion.
func (c *store) casTopic(name string, expectVersion int64, op string, change func(*catalog.Topic) error) (catalog.Topic, error) {
	var t catalog.Topic
	err := c.write(func() (err error) {
		if t, err = c.getTopic(name); err != nil {
			return err
		}
		if t.Version != expectVersion {
			return fmt.Errorf("at version %d, not %d: %w", t.Version, expectVersion, catalog.ErrVersionConflict)
		}
		if err := change(&t); err != nil {
			return err
		}
		t.Version++
		b := c.db.NewBatch()
		set(b, topicKey(name), toTopicRec(t))
		return c.commit(b)
	})
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("%s of topic %q: %w", op, name, err)
	}
	return t, nil
}

// DeleteTopic implements catalog.Topics: the live record moves to the
// deleted-topics key space in one batch.
func (c *store) DeleteTopic(_ context.Context, name string) (catalog.Topic, error) {
	var t catalog.Topic
	err := c.write(func() (err error) {
		if t, err = c.getTopic(name); err != nil {
			return err
		}
		t.DeletedAt = c.now()
		t.Version++
		b := c.db.NewBatch()
		_ = b.Delete(topicKey(name), nil)
		set(b, deletedKey(t.ID), toTopicRec(t))
		return c.commit(b)
	})
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("delete topic %q: %w", name, err)
	}
	return t, nil
}

// PurgeDeletedTopic implements catalog.DeletedTopics, in one batch.
func (c *store) PurgeDeletedTopic(_ context.Context, id catalog.TopicID) error {
	err := c.write(func() error {
		var r topicRec
		found, err := c.get(deletedKey(id), &r)
		if err != nil {
			return err
		}
		if !found {
			return catalog.ErrNotFound
		}
		b := c.db.NewBatch()
		prefix := partitionPrefix(id)
		_ = b.DeleteRange(prefix, prefixEnd(prefix), nil)
		_ = b.Delete(deletedKey(id), nil)
		return c.commit(b)
	})
	if err != nil {
		return fmt.Errorf("purge deleted topic %s: %w", id, err)
	}
	return nil
}
