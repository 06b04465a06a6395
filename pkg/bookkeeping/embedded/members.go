package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Join implements bookkeeping.Members.
func (s *store) Join(ctx context.Context, group string, m bookkeeping.Member) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	now := s.now()
	b := s.db.NewBatch()
	defer b.Close()
	live, already := 0, false
	err = s.scanMembers(group, func(id string, r memberRecord) error {
		if now.UnixNano() >= r.expiresAt {
			return b.Delete(memberKey(group, id), nil) // collect garbage while here
		}
		live++
		already = already || id == m.ID
		return nil
	})
	if err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	if !already && live >= bookkeeping.MaxGroupMembers {
		return fmt.Errorf("join group %q: %w: the group has the maximum of %d members", group, bookkeeping.ErrConflict, bookkeeping.MaxGroupMembers)
	}
	rec := memberRecord{clientInfo: m.ClientInfo, sessionTimeout: int64(m.SessionTimeout), expiresAt: now.Add(m.SessionTimeout).UnixNano(), topics: m.Topics}
	if err := b.Set(memberKey(group, m.ID), rec.encode(), nil); err != nil {
		return err
	}
	if err := recordGroup(b, group); err != nil {
		return err
	}
	if err := commit(b); err != nil {
		return fmt.Errorf("join group %q: %w", group, err)
	}
	return nil
}

// Heartbeat implements bookkeeping.Members. The record keeps its topics
// (and is rewritten in the current member format).
func (s *store) Heartbeat(ctx context.Context, group, memberID string) error {
	return s.updateMember(ctx, "heartbeat", group, memberID, func(key []byte, r memberRecord, now time.Time) error {
		r.expiresAt = now.Add(time.Duration(r.sessionTimeout)).UnixNano()
		return s.db.Set(key, r.encode(), syncWrite)
	})
}

// Leave implements bookkeeping.Members. The member's leases are free at once
// because a lease whose owner is not live is free.
func (s *store) Leave(ctx context.Context, group, memberID string) error {
	return s.updateMember(ctx, "leave", group, memberID, func(key []byte, _ memberRecord, _ time.Time) error {
		return s.db.Delete(key, syncWrite)
	})
}

// updateMember runs f on a live member under the writer lock; a member that
// is missing or expired is ErrNotFound (and an expired record is deleted).
func (s *store) updateMember(ctx context.Context, op, group, memberID string, f func(key []byte, r memberRecord, now time.Time) error) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	key := memberKey(group, memberID)
	r, found, err := s.member(key)
	if err != nil {
		return fmt.Errorf("%s %q of group %q: %w", op, memberID, group, err)
	}
	now := s.now()
	if found && now.UnixNano() >= r.expiresAt {
		if err := s.db.Delete(key, syncWrite); err != nil {
			return fmt.Errorf("%s %q of group %q: delete expired member: %w", op, memberID, group, err)
		}
		found = false
	}
	if !found {
		return fmt.Errorf("%s %q of group %q: member %w (expired, left or never joined)", op, memberID, group, bookkeeping.ErrNotFound)
	}
	if err := f(key, r, now); err != nil {
		return fmt.Errorf("%s %q of group %q: %w", op, memberID, group, err)
	}
	return nil
}

// ListMembers implements bookkeeping.Members.
func (s *store) ListMembers(ctx context.Context, group string) ([]bookkeeping.Member, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := s.now().UnixNano()
	ms := []bookkeeping.Member{}
	err = s.scanMembers(group, func(id string, r memberRecord) error {
		if now < r.expiresAt {
			ms = append(ms, bookkeeping.Member{ID: id, ClientInfo: r.clientInfo, SessionTimeout: time.Duration(r.sessionTimeout),
				Topics: r.topics, LastHeartbeat: r.lastHeartbeat()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list members of group %q: %w", group, err)
	}
	return ms, nil
}

// member reads the member record at key.
func (s *store) member(key []byte) (memberRecord, bool, error) {
	v, err := s.get(key)
	if err != nil || v == nil {
		return memberRecord{}, false, err
	}
	r, err := decodeMember(v)
	if err != nil {
		return memberRecord{}, false, fmt.Errorf("member record %q: %w", key, err)
	}
	return r, true, nil
}

// isLive reports whether member is a live member of group. The caller holds
// mu.
func (s *store) isLive(group, member string) (bool, error) {
	r, found, err := s.member(memberKey(group, member))
	return found && s.now().UnixNano() < r.expiresAt, err
}

// scanMembers calls f for every member record of group, live or not, in id
// order.
func (s *store) scanMembers(group string, f func(id string, r memberRecord) error) error {
	p := memberPrefix(group)
	return s.scan(p, prefixEnd(p), func(k, v []byte) (bool, error) {
		r, err := decodeMember(v)
		if err != nil {
			return false, fmt.Errorf("member record %q: %w", k, err)
		}
		return true, f(memberFromKey(group, k), r)
	})
}
