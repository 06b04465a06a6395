package cassandra

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

const (
	insertMember = `INSERT INTO group_members (group_id, member_id, client_info, session_timeout_ms, topics, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`
	// renewMember is insertMember at a given write timestamp (see Heartbeat).
	renewMember  = insertMember + ` AND TIMESTAMP ?`
	selectMember = `SELECT client_info, session_timeout_ms, topics, WRITETIME(session_timeout_ms) FROM group_members WHERE group_id = ? AND member_id = ?`
	deleteMember = `DELETE FROM group_members WHERE group_id = ? AND member_id = ?`
	listMembers  = `SELECT member_id, client_info, session_timeout_ms, topics, heartbeat_at, WRITETIME(session_timeout_ms) FROM group_members WHERE group_id = ? LIMIT ?`
	listLiveIDs  = `SELECT member_id FROM group_members WHERE group_id = ? LIMIT ?`
)

// ttlSeconds is the TTL of a member row. Cassandra expires a cell when the
// current second reaches write-second + TTL, so a row can die up to one
// second early; one extra second keeps the member live for at least its
// session timeout.
func ttlSeconds(timeout time.Duration) int {
	return int(math.Ceil(timeout.Seconds())) + 1
}

// Join implements bookkeeping.Members.
func (s *store) Join(ctx context.Context, group string, m bookkeeping.Member) error {
	ids, err := s.memberIDs(ctx, group, bookkeeping.MaxGroupMembers+1)
	if err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	if len(ids) >= bookkeeping.MaxGroupMembers && !slices.Contains(ids, m.ID) {
		return fmt.Errorf("join group %q: %w: the group has the maximum of %d members", group, bookkeeping.ErrConflict, bookkeeping.MaxGroupMembers)
	}
	// Listed before the member exists, so a member never lacks its group.
	if err := s.recordGroup(ctx, group); err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	m.LastHeartbeat = s.now()
	if err := s.write(insertMember, memberArgs(group, m)...).Idempotent(true).ExecContext(ctx); err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	return nil
}

// memberArgs are the arguments of insertMember for m.
func memberArgs(group string, m bookkeeping.Member) []any {
	topics := m.Topics
	if topics == nil {
		topics = []string{} // an empty list, not null: null would write a tombstone
	}
	return []any{group, m.ID, m.ClientInfo, m.SessionTimeout.Milliseconds(), topics, m.LastHeartbeat, ttlSeconds(m.SessionTimeout)}
}

// Heartbeat implements bookkeeping.Members. It rewrites the whole row with
// what it read (a TTL is per cell, so every cell needs the new one) and a new
// heartbeat_at.
//
// The rewrite carries the write timestamp of the row it read plus 1 µs, not
// the current time, so it only wins over what it read: a Join that replaced
// the member's topics, or a Leave, after the read keeps its effect instead of
// being overwritten by the stale copy.
func (s *store) Heartbeat(ctx context.Context, group, memberID string) error {
	m, written, err := s.liveMember(ctx, "heartbeat", group, memberID)
	if err != nil {
		return err
	}
	m.LastHeartbeat = s.now()
	args := append(memberArgs(group, m), written+1)
	if err := s.write(renewMember, args...).Idempotent(true).ExecContext(ctx); err != nil {
		return fmt.Errorf("heartbeat %q of group %q: %w", memberID, group, err)
	}
	return nil
}

// Leave implements bookkeeping.Members. Deleting the row is all it takes to
// free the member's leases: a lease whose owner is not live is free.
func (s *store) Leave(ctx context.Context, group, memberID string) error {
	if _, _, err := s.liveMember(ctx, "leave", group, memberID); err != nil {
		return err
	}
	if err := s.write(deleteMember, group, memberID).Idempotent(true).ExecContext(ctx); err != nil {
		return fmt.Errorf("leave %q of group %q: %w", memberID, group, err)
	}
	return nil
}

// liveMember reads a live member's row and its write timestamp (µs);
// ErrNotFound when there is none.
func (s *store) liveMember(ctx context.Context, op, group, memberID string) (bookkeeping.Member, int64, error) {
	m := bookkeeping.Member{ID: memberID}
	var timeoutMS, written int64
	err := s.read(selectMember, group, memberID).ScanContext(ctx, &m.ClientInfo, &timeoutMS, &m.Topics, &written)
	if err == gocql.ErrNotFound {
		return m, 0, fmt.Errorf("%s %q of group %q: member %w (expired, left or never joined)", op, memberID, group, bookkeeping.ErrNotFound)
	}
	if err != nil {
		return m, 0, fmt.Errorf("%s %q of group %q: %w", op, memberID, group, err)
	}
	m.SessionTimeout = time.Duration(timeoutMS) * time.Millisecond
	if len(m.Topics) == 0 {
		m.Topics = nil
	}
	if err := m.Validate(); err != nil {
		return m, 0, fmt.Errorf("%s %q of group %q: stored member is invalid: %w", op, memberID, group, err)
	}
	return m, written, nil
}

// ListMembers implements bookkeeping.Members. A row written by a binary
// older than schema v3 has no heartbeat_at; its write time stands in.
func (s *store) ListMembers(ctx context.Context, group string) ([]bookkeeping.Member, error) {
	ms := []bookkeeping.Member{}
	sc := s.read(listMembers, group, 2*bookkeeping.MaxGroupMembers).IterContext(ctx).Scanner()
	for sc.Next() {
		var (
			m                  bookkeeping.Member
			timeoutMS, written int64
		)
		if err := sc.Scan(&m.ID, &m.ClientInfo, &timeoutMS, &m.Topics, &m.LastHeartbeat, &written); err != nil {
			_ = sc.Err() // releases the iterator
			return nil, fmt.Errorf("list members of group %q: %w", group, err)
		}
		m.SessionTimeout = time.Duration(timeoutMS) * time.Millisecond
		if len(m.Topics) == 0 {
			m.Topics = nil
		}
		if m.LastHeartbeat.IsZero() {
			m.LastHeartbeat = time.UnixMicro(written).UTC()
		}
		ms = append(ms, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list members of group %q: %w", group, err)
	}
	return ms, nil
}

// memberIDs returns up to limit live member ids of group, sorted.
func (s *store) memberIDs(ctx context.Context, group string, limit int) ([]string, error) {
	var ids []string
	iter := s.read(listLiveIDs, group, limit).IterContext(ctx)
	var id string
	for iter.Scan(&id) {
		ids = append(ids, id)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list members of group %q: %w", group, err)
	}
	return ids, nil
}

// liveSet returns the live members of group as a set.
func (s *store) liveSet(ctx context.Context, group string) (map[string]bool, error) {
	ids, err := s.memberIDs(ctx, group, 2*bookkeeping.MaxGroupMembers)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}
