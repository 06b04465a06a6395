package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getOwner reads an owner record; callers hold the lock.
func (c *store) getOwner(id string) (catalog.Owner, bool, error) {
	var r ownerRec
	found, err := c.get(ownerKey(id), &r)
	return r.owner(), found, err
}

// HeartbeatOwner implements catalog.Owners.
func (c *store) HeartbeatOwner(_ context.Context, id, address string, ttl time.Duration) (catalog.Owner, error) {
	r := ownerRec{ID: id, Address: address}
	err := c.write(func() error {
		if err := c.checkRegistryRoom(ownerPrefix, ownerKey(id), catalog.MaxOwners); err != nil {
			return err
		}
		r.ExpiresMs = catalog.Timestamp(c.clock.Now().Add(ttl)).UnixMilli()
		b := c.db.NewBatch()
		set(b, ownerKey(id), r)
		return c.commit(b)
	})
	if err != nil {
		return catalog.Owner{}, fmt.Errorf("heartbeat owner %q: %w", id, err)
	}
	return r.owner(), nil
}

// GetOwner implements catalog.Owners.
func (c *store) GetOwner(_ context.Context, id string) (catalog.Owner, error) {
	var o catalog.Owner
	err := c.read(func() error {
		var found bool
		var err error
		if o, found, err = c.getOwner(id); err == nil && !found {
			err = catalog.ErrNotFound
		}
		return err
	})
	if err != nil {
		return catalog.Owner{}, fmt.Errorf("get owner %q: %w", id, err)
	}
	return o, nil
}

// ListLiveOwners implements catalog.Owners.
func (c *store) ListLiveOwners(_ context.Context) ([]catalog.Owner, error) {
	var live []catalog.Owner
	err := c.read(func() error {
		now := c.clock.Now()
		return c.scanRegistry(ownerPrefix, catalog.MaxOwners, func(k, v []byte) error {
			var r ownerRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			if o := r.owner(); o.LiveAt(now) {
				live = append(live, o)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list live owners: %w", err)
	}
	return live, nil
}

// RemoveOwner implements catalog.Owners.
func (c *store) RemoveOwner(_ context.Context, id string) error {
	err := c.write(func() error { return c.remove(ownerKey(id)) })
	if err != nil {
		return fmt.Errorf("remove owner %q: %w", id, err)
	}
	return nil
}

// remove deletes an existing key; ErrNotFound if it does not exist.
func (c *store) remove(key []byte) error {
	_, closer, err := c.db.Get(key)
	if err != nil {
		return notFound(err)
	}
	_ = closer.Close()
	b := c.db.NewBatch()
	_ = b.Delete(key, nil)
	return c.commit(b)
}

// checkRegistryRoom refuses a new key under prefix once max records exist.
// Renewals of an existing record always pass.
func (c *store) checkRegistryRoom(prefix, key []byte, max int) error {
	_, closer, err := c.db.Get(key)
	if err == nil {
		return closer.Close()
	}
	if err := notFound(err); err != catalog.ErrNotFound {
		return err
	}
	n := 0
	err = c.scanRegistry(prefix, max+1, func(_, _ []byte) error { n++; return nil })
	if err == nil && n >= max {
		err = fmt.Errorf("%d records: %w", n, catalog.ErrLimitExceeded)
	}
	return err
}

// scanRegistry visits every record under prefix, failing with
// ErrLimitExceeded past max of them.
func (c *store) scanRegistry(prefix []byte, max int, visit func(k, v []byte) error) error {
	next, err := c.scan(prefix, "", max, visit)
	if err == nil && next != "" {
		err = fmt.Errorf("more than %d records: %w", max, catalog.ErrLimitExceeded)
	}
	return err
}
