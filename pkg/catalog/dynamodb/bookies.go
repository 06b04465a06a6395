package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// HeartbeatBookie implements catalog.Bookies: one put per heartbeat.
func (c *store) HeartbeatBookie(ctx context.Context, bk catalog.Bookie, ttl time.Duration) (catalog.Bookie, error) {
	bk.ExpiresAt = catalog.Timestamp(c.clock.Now().Add(ttl))
	if err := c.heartbeat(ctx, pkBookies, bookieItem(bk), catalog.MaxBookies); err != nil {
		return catalog.Bookie{}, fmt.Errorf("heartbeat bookie %q: %w", bk.ID, err)
	}
	return bk, nil
}

// ListLiveBookies implements catalog.Bookies.
func (c *store) ListLiveBookies(ctx context.Context) ([]catalog.Bookie, error) {
	items, err := c.queryAll(ctx, pkBookies, catalog.MaxBookies)
	if err != nil {
		return nil, fmt.Errorf("list live bookies: %w", err)
	}
	now := c.clock.Now()
	var live []catalog.Bookie
	for _, it := range items {
		bk, err := decodeBookie(it)
		if err != nil {
			return nil, fmt.Errorf("list live bookies: %w", err)
		}
		if bk.LiveAt(now) {
			live = append(live, bk)
		}
	}
	return live, nil
}

// RemoveBookie implements catalog.Bookies.
func (c *store) RemoveBookie(ctx context.Context, id string) error {
	err := c.deleteIf(ctx, pkBookies, id, exists)
	if errors.Is(err, errCondition) {
		err = catalog.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("remove bookie %q: %w", id, err)
	}
	return nil
}
