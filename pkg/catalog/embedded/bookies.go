package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// HeartbeatBookie implements catalog.Bookies.
func (c *store) HeartbeatBookie(_ context.Context, b catalog.Bookie, ttl time.Duration) (catalog.Bookie, error) {
	r := bookieRec{ID: b.ID, Address: b.Address, FreeBytes: b.FreeBytes, TotalBytes: b.TotalBytes, ReadOnly: b.ReadOnly, Draining: b.Draining}
	err := c.write(func() error {
		if err := c.checkRegistryRoom(bookiePrefix, bookieKey(b.ID), catalog.MaxBookies); err != nil {
			return err
		}
		r.ExpiresMs = catalog.Timestamp(c.clock.Now().Add(ttl)).UnixMilli()
		batch := c.db.NewBatch()
		set(batch, bookieKey(b.ID), r)
		return c.commit(batch)
	})
	if err != nil {
		return catalog.Bookie{}, fmt.Errorf("heartbeat bookie %q: %w", b.ID, err)
	}
	return r.bookie(), nil
}

// ListLiveBookies implements catalog.Bookies.
func (c *store) ListLiveBookies(_ context.Context) ([]catalog.Bookie, error) {
	var live []catalog.Bookie
	err := c.read(func() error {
		now := c.clock.Now()
		return c.scanRegistry(bookiePrefix, catalog.MaxBookies, func(k, v []byte) error {
			var r bookieRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			if b := r.bookie(); b.LiveAt(now) {
				live = append(live, b)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list live bookies: %w", err)
	}
	return live, nil
}

// RemoveBookie implements catalog.Bookies.
func (c *store) RemoveBookie(_ context.Context, id string) error {
	err := c.write(func() error { return c.remove(bookieKey(id)) })
	if err != nil {
		return fmt.Errorf("remove bookie %q: %w", id, err)
	}
	return nil
}
