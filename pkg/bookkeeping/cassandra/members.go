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
	insertMember = `INSERT INTO group_members (group_id, member_id, client_info, session_timeout_ms) VALUES (?, ?, ?, ?) USING TTL ?`
	selectMember = `SELECT client_info, session_timeout_ms FROM group_members WHERE group_id = ? AND member_id = ?`
	deleteMember = `DELETE FROM group_members WHERE group_id = ? AND member_id = ?`
	listMembers  = `SELECT member_id, client_info, session_timeout_ms FROM group_members WHERE group_id = ? LIMIT ?`
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
func (s *Store) Join(ctx context.Context, group string, m bookkeeping.Member) error {
	if err := bookkeeping.ValidateName("group", group); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	ids, err := s.memberIDs(ctx, group, bookkeeping.MaxGroupMembers+1)
	if err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	if len(ids) >= bookkeeping.MaxGroupMembers && !slices.Contains(ids, m.ID) {
		return fmt.Errorf("join group %q: %w: the group has the maximum of %d members", group, bookkeeping.ErrConflict, bookkeeping.MaxGroupMembers)
	}
	if err := s.putMember(ctx, group, m); err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	return nil
}

func (s *Store) putMember(ctx context.Context, group string, m bookkeeping.Member) error {
	return s.write(insertMember, group, m.ID, m.ClientInfo, m.SessionTimeout.Milliseconds(), ttlSeconds(m.SessionTimeout)).
		Idempotent(true).ExecContext(ctx)
}

// Heartbeat implements bookkeeping.Members. It rewrites the whole row (a TTL
// is per cell, so every cell needs the new one).
func (s *Store) Heartbeat(ctx context.Context, group, memberID string) error {
	m, err := s.liveMember(ctx, "heartbeat", group, memberID)
	if err != nil {
		return err
	}
	if err := s.putMember(ctx, group, m); err != nil {
		return fmt.Errorf("heartbeat %q of group %q: %w", memberID, group, err)
	}
	return nil
}

// Leave implements bookkeeping.Members. Deleting the row is all it takes to
// free the member's leases: a lease whose owner is not live is free.
func (s *Store) Leave(ctx context.Context, group, memberID string) error {
	if _, err := s.liveMember(ctx, "leave", group, memberID); err != nil {
		return err
	}
	if err := s.write(deleteMember, group, memberID).Idempotent(true).ExecContext(ctx); err != nil {
		return fmt.Errorf("leave %q of group %q: %w", memberID, group, err)
	}
	return nil
}

// liveMember reads a live member's row; ErrNotFound when there is none.
func (s *Store) liveMember(ctx context.Context, op, group, memberID string) (bookkeeping.Member, error) {
	if err := bookkeeping.ValidateName("group", group); err != nil {
		return bookkeeping.Member{}, err
	}
	if err := bookkeeping.ValidateName("member", memberID); err != nil {
		return bookkeeping.Member{}, err
	}
	m := bookkeeping.Member{ID: memberID}
	var timeoutMS int64
	err := s.read(selectMember, group, memberID).ScanContext(ctx, &m.ClientInfo, &timeoutMS)
	if err == gocql.ErrNotFound {
		return m, fmt.Errorf("%s %q of group %q: member %w (expired, left or never joined)", op, memberID, group, bookkeeping.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("%s %q of group %q: %w", op, memberID, group, err)
	}
	m.SessionTimeout = time.Duration(timeoutMS) * time.Millisecond
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("%s %q of group %q: stored member is invalid: %w", op, memberID, group, err)
	}
	return m, nil
}

// ListMembers implements bookkeeping.Members.
func (s *Store) ListMembers(ctx context.Context, group string) ([]bookkeeping.Member, error) {
	if err := bookkeeping.ValidateName("group", group); err != nil {
		return nil, err
	}
	ms := []bookkeeping.Member{}
	iter := s.read(listMembers, group, 2*bookkeeping.MaxGroupMembers).IterContext(ctx)
	var (
		m         bookkeeping.Member
		timeoutMS int64
	)
	for iter.Scan(&m.ID, &m.ClientInfo, &timeoutMS) {
		m.SessionTimeout = time.Duration(timeoutMS) * time.Millisecond
		ms = append(ms, m)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list members of group %q: %w", group, err)
	}
	return ms, nil
}

// memberIDs returns up to limit live member ids of group, sorted.
func (s *Store) memberIDs(ctx context.Context, group string, limit int) ([]string, error) {
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
func (s *Store) liveSet(ctx context.Context, group string) (map[string]bool, error) {
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
