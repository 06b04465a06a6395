package cassandra

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// groupsBucket is the consumer_groups partition every group is in (see the
// package doc: one partition until it grows too large).
const groupsBucket = 0

const (
	insertGroup = `INSERT INTO consumer_groups (bucket, group_id) VALUES (?, ?)`
	listGroups  = `SELECT group_id FROM consumer_groups WHERE bucket = ? AND group_id > ? LIMIT ?`
)

// ListGroups implements bookkeeping.Groups: one read of limit+1 rows of the
// consumer_groups partition, which Cassandra keeps sorted by group (text
// compares as UTF-8 bytes, the order of the contract).
func (s *store) ListGroups(ctx context.Context, after string, limit int) ([]string, bool, error) {
	groups := []string{}
	iter := s.read(listGroups, groupsBucket, after, limit+1).IterContext(ctx)
	var g string
	for iter.Scan(&g) {
		groups = append(groups, g)
	}
	if err := iter.Close(); err != nil {
		return nil, false, fmt.Errorf("list groups: %w", err)
	}
	if len(groups) > limit {
		return groups[:limit], true, nil
	}
	return groups, false, nil
}

// recordGroup lists group in consumer_groups (idempotent).
func (s *store) recordGroup(ctx context.Context, group string) error {
	return s.write(insertGroup, groupsBucket, group).Idempotent(true).ExecContext(ctx)
}

// backfillGroups lists in consumer_groups every group that has rows in
// group_members or group_topics: what binaries before schema v3 stored
// without listing it. Both are scans of partition keys only (SELECT
// DISTINCT), paged by the driver; the inserts are idempotent, so a backfill
// interrupted half-way is simply run again.
func backfillGroups(ctx context.Context, s *gocql.Session, cons gocql.Consistency) error {
	for _, table := range []string{"group_members", "group_topics"} {
		// The table names are constants, so formatting them is safe.
		iter := s.Query(fmt.Sprintf("SELECT DISTINCT group_id FROM %s", table)).Consistency(cons).Idempotent(true).IterContext(ctx)
		var g string
		for iter.Scan(&g) {
			if err := s.Query(insertGroup, groupsBucket, g).Consistency(cons).Idempotent(true).ExecContext(ctx); err != nil {
				_ = iter.Close()
				return fmt.Errorf("list group %q: %w", g, err)
			}
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
	}
	return nil
}
