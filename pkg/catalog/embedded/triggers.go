package embedded

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// CreateTrigger implements catalog.Triggers: the topic read and the trigger
// written under the write lock, so the topic exists at the commit.
func (c *store) CreateTrigger(_ context.Context, name string, spec catalog.TriggerSpec) (catalog.Trigger, error) {
	var tr catalog.Trigger
	err := c.write(func() error {
		// The topic first, as the DynamoDB catalog decides: a missing topic
		// is ErrNotFound even when the name is taken too.
		t, err := c.getTopic(spec.Topic)
		if err != nil {
			return fmt.Errorf("topic %q: %w", spec.Topic, err)
		}
		var old triggerRec
		found, err := c.get(triggerKey(name), &old)
		if err != nil {
			return err
		}
		if found {
			return catalog.ErrAlreadyExists
		}
		now := c.now()
		tr = catalog.Trigger{Name: name, TriggerSpec: spec.WithDefaults(), TopicID: t.ID, CreatedAt: now, UpdatedAt: now, Version: 1}
		b := c.db.NewBatch()
		set(b, triggerKey(name), toTriggerRec(tr))
		return c.commit(b)
	})
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("create trigger %q: %w", name, err)
	}
	return tr, nil
}

// getTrigger reads a trigger; callers hold the lock.
func (c *store) getTrigger(name string) (catalog.Trigger, error) {
	var r triggerRec
	key := triggerKey(name)
	found, err := c.get(key, &r)
	if err != nil {
		return catalog.Trigger{}, err
	}
	if !found {
		return catalog.Trigger{}, catalog.ErrNotFound
	}
	tr, err := r.trigger()
	if err != nil {
		return catalog.Trigger{}, corrupt(key, err)
	}
	return tr, nil
}

// GetTrigger implements catalog.Triggers.
func (c *store) GetTrigger(_ context.Context, name string) (catalog.Trigger, error) {
	var tr catalog.Trigger
	err := c.read(func() (err error) { tr, err = c.getTrigger(name); return err })
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("get trigger %q: %w", name, err)
	}
	return tr, nil
}

// ListTriggers implements catalog.Triggers.
func (c *store) ListTriggers(_ context.Context, pageToken string, limit int) (catalog.Page[catalog.Trigger], error) {
	var page catalog.Page[catalog.Trigger]
	err := c.read(func() (err error) {
		page.NextPageToken, err = c.scan(triggerPrefix, pageToken, limit, func(k, v []byte) error {
			var r triggerRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			tr, err := r.trigger()
			if err != nil {
				return corrupt(k, err)
			}
			page.Items = append(page.Items, tr)
			return nil
		})
		return err
	})
	if err != nil {
		return catalog.Page[catalog.Trigger]{}, fmt.Errorf("list triggers: %w", err)
	}
	return page, nil
}

// UpdateTrigger implements catalog.Triggers.
func (c *store) UpdateTrigger(_ context.Context, name string, spec catalog.TriggerSpec, expectVersion int64) (catalog.Trigger, error) {
	var tr catalog.Trigger
	err := c.write(func() (err error) {
		if tr, err = c.getTrigger(name); err != nil {
			return err
		}
		if tr.Version != expectVersion {
			return fmt.Errorf("at version %d, not %d: %w", tr.Version, expectVersion, catalog.ErrVersionConflict)
		}
		if err := catalog.CheckTriggerUpdate(tr, spec); err != nil {
			return err
		}
		tr.TriggerSpec, tr.UpdatedAt = spec.WithDefaults(), c.now()
		tr.Version++
		b := c.db.NewBatch()
		set(b, triggerKey(name), toTriggerRec(tr))
		return c.commit(b)
	})
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("update trigger %q: %w", name, err)
	}
	return tr, nil
}

// DeleteTrigger implements catalog.Triggers.
func (c *store) DeleteTrigger(_ context.Context, name string) (catalog.Trigger, error) {
	var tr catalog.Trigger
	err := c.write(func() (err error) {
		if tr, err = c.getTrigger(name); err != nil {
			return err
		}
		b := c.db.NewBatch()
		_ = b.Delete(triggerKey(name), nil)
		return c.commit(b)
	})
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("delete trigger %q: %w", name, err)
	}
	return tr, nil
}
