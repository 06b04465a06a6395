package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/services/ingest/balance"
)

// balanceRound compares this copy's partitions with its fair share among the
// live copies and acquires or releases (services/ingest/balance decides; the
// catalog's conditional writes settle races). Released partitions are kept
// from being re-taken on demand for a while, so the copy below its share can
// take them.
func (s *Service) balanceRound(ctx context.Context) error {
	owners, err := s.d.Catalog.ListLiveOwners(ctx)
	if err != nil {
		return fmt.Errorf("list owners: %w", err)
	}
	in := balance.Input{Me: s.cfg.OwnerID}
	for _, o := range owners {
		in.Owners = append(in.Owners, o.ID)
	}
	topics := map[string]catalog.Topic{}
	token := ""
	for {
		page, err := s.d.Catalog.ListTopics(ctx, token, 0)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		for _, t := range page.Items {
			topics[t.Name] = t
			ptoken := ""
			for {
				pp, err := s.d.Catalog.ListPartitions(ctx, t.Name, ptoken, catalog.MaxPageSize)
				if errors.Is(err, catalog.ErrNotFound) {
					break // deleted meanwhile
				}
				if err != nil {
					return fmt.Errorf("list partitions of %s: %w", t.Name, err)
				}
				for _, p := range pp.Items {
					owner := p.Owner
					if owner == s.cfg.OwnerID && !s.writing(t.ID, p.Index) {
						// The catalog says we own it, but no writer of ours
						// runs (a previous session of this owner id): treat
						// it as free so it is taken (with a new epoch).
						owner = ""
					}
					in.Partitions = append(in.Partitions, balance.Partition{Key: balance.Key{Topic: t.Name, Index: p.Index}, Owner: owner})
				}
				if ptoken = pp.NextPageToken; ptoken == "" {
					break
				}
			}
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	plan, err := s.balancer.Plan(in)
	if errors.Is(err, balance.ErrNotLive) {
		return nil // heartbeat lapsed: take nothing; the next beat fixes it
	}
	if err != nil {
		return err
	}
	// Takeovers and hand-overs run OpenParallelism at a time; the round
	// ends when all have.
	sem := make(chan struct{}, s.cfg.OpenParallelism)
	var wg sync.WaitGroup
	each := func(keys []balance.Key, do func(catalog.Topic, balance.Key)) {
		for _, k := range keys {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				do(topics[k.Topic], k)
			}()
		}
	}
	each(plan.Acquire, func(t catalog.Topic, k balance.Key) {
		s.mu.Lock()
		delete(s.released, slotKey{t.ID, k.Index})
		s.mu.Unlock()
		if err := s.open(ctx, t, k.Index); err != nil && !errors.Is(err, catalog.ErrOwned) {
			s.log.Warn("ingest could not acquire a partition", slog.String("topic", k.Topic), slog.Int("partition", k.Index), slog.Any("err", err))
		}
	})
	each(plan.Release, func(t catalog.Topic, k balance.Key) { s.release(ctx, slotKey{t.ID, k.Index}) })
	wg.Wait()
	if len(plan.Acquire)+len(plan.Release) > 0 {
		s.log.Info("ingest rebalanced", slog.Int("acquired", len(plan.Acquire)), slog.Int("released", len(plan.Release)), slog.Int("held", plan.Held), slog.Int("share", plan.Share))
	}
	return nil
}

// writing reports whether this copy runs a writer for the partition.
func (s *Service) writing(topic catalog.TopicID, p int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.writers[slotKey{topic, p}]
	return sl != nil
}

// release hands one partition over: its writer drains, seals and releases
// the lease.
func (s *Service) release(ctx context.Context, key slotKey) {
	s.mu.Lock()
	sl := s.writers[key]
	if sl == nil {
		s.mu.Unlock()
		return
	}
	s.released[key] = time.Now()
	s.mu.Unlock()
	select {
	case <-sl.ready:
	case <-ctx.Done():
		return
	}
	if sl.w != nil {
		if err := sl.w.Close(ctx); err != nil {
			s.log.Warn("ingest could not hand a partition over cleanly", slog.Any("err", err))
		}
	}
	s.drop(key, sl)
}

// recentlyReleased reports whether this copy gave the partition up within
// two balancing intervals (it should not take it back on demand).
func (s *Service) recentlyReleasedLocked(key slotKey) bool {
	at, ok := s.released[key]
	if !ok {
		return false
	}
	if time.Since(at) > 2*s.cfg.BalanceInterval {
		delete(s.released, key)
		return false
	}
	return true
}
