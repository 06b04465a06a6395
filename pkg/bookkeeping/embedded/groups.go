package embedded

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ListGroups implements bookkeeping.Groups: a scan of the group records,
// whose keys sort by group name.
func (s *store) ListGroups(ctx context.Context, after string, limit int) ([]string, bool, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	all := []byte{prefixGroup}
	lower := all
	if after != "" {
		// Names never contain NUL, so after+NUL is the first key after
		// after's own.
		lower = append(groupKey(after), 0)
	}
	groups := []string{}
	more := false
	err = s.scan(lower, prefixEnd(all), func(k, v []byte) (bool, error) {
		if _, err := decodeGroup(v); err != nil {
			return false, fmt.Errorf("group record %q: %w", k, err)
		}
		if len(groups) == limit {
			more = true
			return false, nil
		}
		groups = append(groups, string(k[1:]))
		return true, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list groups: %w", err)
	}
	return groups, more, nil
}

// recordGroup adds group's record to b (idempotent: the record has no
// fields to lose).
func recordGroup(b *pebble.Batch, group string) error {
	return b.Set(groupKey(group), groupRecord{}.encode(), nil)
}
