package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// CreateTrigger implements catalog.Triggers: the topic is read for its
// incarnation id, then one transaction puts the trigger (if absent) with a
// ConditionCheck that the topic is still that incarnation, so a trigger is
// never created on a topic deleted meanwhile.
func (c *store) CreateTrigger(ctx context.Context, name string, spec catalog.TriggerSpec) (catalog.Trigger, error) {
	for range casAttempts {
		tr, err := c.createTrigger(ctx, name, spec)
		if errors.Is(err, catalog.ErrVersionConflict) {
			// Only a transaction conflict gives this: a concurrent write
			// of the trigger or the topic. Decide again from a fresh read
			// (a concurrent create of the name then is ErrAlreadyExists).
			continue
		}
		if err != nil {
			return catalog.Trigger{}, fmt.Errorf("create trigger %q: %w", name, err)
		}
		return tr, nil
	}
	return catalog.Trigger{}, fmt.Errorf("create trigger %q: %d attempts lost a race: %w", name, casAttempts, catalog.ErrVersionConflict)
}

func (c *store) createTrigger(ctx context.Context, name string, spec catalog.TriggerSpec) (catalog.Trigger, error) {
	t, err := c.getTopic(ctx, spec.Topic)
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("topic %q: %w", spec.Topic, err)
	}
	now := c.now()
	tr := catalog.Trigger{Name: name, TriggerSpec: spec.WithDefaults(), TopicID: t.ID, CreatedAt: now, UpdatedAt: now, Version: 1}
	sameTopic := cond{expr: "#id = :tid", names: map[string]string{"#id": "id"}, values: map[string]av{":tid": s(string(t.ID))}}
	err = c.transact(ctx, []txOp{
		c.txPut(triggerItem(tr), notExists, catalog.ErrAlreadyExists),
		c.txCheck(pkTopics, spec.Topic, sameTopic, fmt.Errorf("topic %q was deleted: %w", spec.Topic, catalog.ErrNotFound)),
	})
	if err != nil {
		return catalog.Trigger{}, err
	}
	return tr, nil
}

func (c *store) getTrigger(ctx context.Context, name string) (catalog.Trigger, error) {
	it, err := c.get(ctx, pkTriggers, name)
	if err != nil {
		return catalog.Trigger{}, err
	}
	if it == nil {
		return catalog.Trigger{}, catalog.ErrNotFound
	}
	return decodeTrigger(it)
}

// GetTrigger implements catalog.Triggers.
func (c *store) GetTrigger(ctx context.Context, name string) (catalog.Trigger, error) {
	tr, err := c.getTrigger(ctx, name)
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("get trigger %q: %w", name, err)
	}
	return tr, nil
}

// ListTriggers implements catalog.Triggers: a query of the triggers item
// collection, in name (sort-key) order.
func (c *store) ListTriggers(ctx context.Context, pageToken string, limit int) (catalog.Page[catalog.Trigger], error) {
	items, next, err := c.queryPage(ctx, pkTriggers, pageToken, limit)
	if err != nil {
		return catalog.Page[catalog.Trigger]{}, fmt.Errorf("list triggers: %w", err)
	}
	page := catalog.Page[catalog.Trigger]{NextPageToken: next}
	for _, it := range items {
		tr, err := decodeTrigger(it)
		if err != nil {
			return catalog.Page[catalog.Trigger]{}, fmt.Errorf("list triggers: %w", err)
		}
		page.Items = append(page.Items, tr)
	}
	return page, nil
}

// UpdateTrigger implements catalog.Triggers: read, check, and a put
// conditioned on the version read.
func (c *store) UpdateTrigger(ctx context.Context, name string, spec catalog.TriggerSpec, expectVersion int64) (catalog.Trigger, error) {
	tr, err := c.getTrigger(ctx, name)
	if err == nil && tr.Version != expectVersion {
		err = fmt.Errorf("at version %d, not %d: %w", tr.Version, expectVersion, catalog.ErrVersionConflict)
	}
	if err == nil {
		err = catalog.CheckTriggerUpdate(tr, spec)
	}
	if err == nil {
		tr.TriggerSpec, tr.UpdatedAt = spec.WithDefaults(), c.now()
		tr.Version++
		if err = c.putIf(ctx, triggerItem(tr), versionIs(expectVersion)); errors.Is(err, errCondition) {
			err = catalog.ErrVersionConflict
		}
	}
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("update trigger %q: %w", name, err)
	}
	return tr, nil
}

// DeleteTrigger implements catalog.Triggers: a delete conditioned on the
// version read, so the record returned is the one removed.
func (c *store) DeleteTrigger(ctx context.Context, name string) (catalog.Trigger, error) {
	for range casAttempts {
		tr, err := c.getTrigger(ctx, name)
		if err != nil {
			return catalog.Trigger{}, fmt.Errorf("delete trigger %q: %w", name, err)
		}
		err = c.deleteIf(ctx, pkTriggers, name, versionIs(tr.Version))
		if errors.Is(err, errCondition) {
			continue // changed or deleted under us: read again
		}
		if err != nil {
			return catalog.Trigger{}, fmt.Errorf("delete trigger %q: %w", name, err)
		}
		return tr, nil
	}
	return catalog.Trigger{}, fmt.Errorf("delete trigger %q: %d attempts lost a race: %w", name, casAttempts, catalog.ErrVersionConflict)
}
