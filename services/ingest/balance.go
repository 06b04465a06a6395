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
	"github.com/sluicemq/sluice/services/ingest/partition"
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
	// The writers that ran before the topics were listed: one of them
	// whose topic the listing lacks was deleted, and one whose partition
	// the listing shows at a higher epoch was taken over by another copy
	// (fenced; it learns so only at its next write). A writer opened
	// during the listing may be of a topic created after it, or hold an
	// epoch acquired after its partition was read.
	s.mu.Lock()
	before := make(map[slotKey]*slot, len(s.writers))
	running := make(map[slotKey]*partition.Writer)
	for k, sl := range s.writers {
		before[k] = sl
		select {
		case <-sl.ready:
			if sl.err == nil {
				running[k] = sl.w
			}
		default:
		}
	}
	s.mu.Unlock()
	moved := make(map[slotKey]bool)
	topics, err := s.eachPartition(ctx, func(t catalog.Topic, p catalog.Partition) {
		key := slotKey{t.ID, p.Index}
		if w := running[key]; w != nil && p.Epoch > w.Lease().Epoch {
			moved[key] = true
		}
		owner := p.Owner
		if owner == s.cfg.OwnerID && !s.writing(t.ID, p.Index) {
			// The catalog says we own it, but no writer of ours runs (a
			// previous session of this owner id that reclaim could not
			// take back): treat it as free so it is taken (with a new
			// epoch).
			owner = ""
		}
		in.Partitions = append(in.Partitions, balance.Partition{Key: balance.Key{Topic: t.Name, Index: p.Index}, Owner: owner})
	})
	if err != nil {
		return err
	}
	live := make(map[catalog.TopicID]bool, len(topics))
	for _, t := range topics {
		live[t.ID] = true
	}
	// Writers of topics deleted meanwhile (by another copy's DeleteTopic,
	// which fenced them), writers fenced by another copy's takeover, and
	// writers that stopped stop here at the latest; each frees its slot
	// and its goroutine.
	if len(moved) > 0 {
		s.log.Info("ingest drops writers other copies took over", slog.Int("writers", len(moved)))
	}
	s.dropWriters(func(k slotKey, sl *slot) bool {
		if before[k] != sl {
			return false // opened during the listing
		}
		w := running[k]
		return !live[k.topic] || moved[k] || (w != nil && w.Err() != nil)
	})
	plan, err := s.balancer.Plan(in)
	if errors.Is(err, balance.ErrNotLive) {
		return nil // heartbeat lapsed: take nothing; the next beat fixes it
	}
	if err != nil {
		return err
	}
	// Takeovers and hand-overs run OpenParallelism at a time; the round
	// ends when all have.
	each := func(keys []balance.Key, do func(catalog.Topic, balance.Key)) {
		s.parallel(ctx, len(keys), func(i int) { do(topics[keys[i].Topic], keys[i]) })
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
	if len(plan.Acquire)+len(plan.Release) > 0 {
		s.log.Info("ingest rebalanced", slog.Int("acquired", len(plan.Acquire)), slog.Int("released", len(plan.Release)), slog.Int("held", plan.Held), slog.Int("share", plan.Share))
	}
	return nil
}

// eachPartition calls fn for every partition of every live topic, in
// catalog order, and returns the topics by name. A topic deleted meanwhile
// is skipped.
func (s *Service) eachPartition(ctx context.Context, fn func(catalog.Topic, catalog.Partition)) (map[string]catalog.Topic, error) {
	topics := map[string]catalog.Topic{}
	token := ""
	for {
		page, err := s.d.Catalog.ListTopics(ctx, token, 0)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
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
					return nil, fmt.Errorf("list partitions of %s: %w", t.Name, err)
				}
				for _, p := range pp.Items {
					fn(t, p)
				}
				if ptoken = pp.NextPageToken; ptoken == "" {
					break
				}
			}
		}
		if token = page.NextPageToken; token == "" {
			return topics, nil
		}
	}
}

// parallel runs do(0..n-1), OpenParallelism at a time, and returns when
// all have run (or, once ctx ended, when those started have).
func (s *Service) parallel(ctx context.Context, n int, do func(i int)) {
	sem := make(chan struct{}, s.cfg.OpenParallelism)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			do(i)
		})
	}
}

// reclaim takes back, at once, every partition the catalog says this
// owner id writes while no writer of this copy runs it: a restart of the
// same copy (sluice dev, or an ingest copy restarted with its --id). Until
// a partition is taken over, its open ledger's last entries may be beyond
// the LAC its bookies know (the writer died before it pushed one), so
// reads would see a short end until the lease expired and another copy
// recovered it; taking it over recovers that ledger now. A partition that
// cannot be taken back is tried again a few times, then left to balancing.
// It returns how many partitions it took back and how many it could not.
func (s *Service) reclaim(ctx context.Context) (taken, failed int) {
	type part struct {
		t catalog.Topic
		p int
	}
	var todo []part
	for attempt := range reclaimAttempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * reclaimBackoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return taken, len(todo)
			}
		}
		todo = todo[:0]
		_, err := s.eachPartition(ctx, func(t catalog.Topic, p catalog.Partition) {
			if p.Owner == s.cfg.OwnerID && !s.writing(t.ID, p.Index) {
				todo = append(todo, part{t, p.Index})
			}
		})
		if err != nil {
			s.log.Warn("ingest could not list its partitions to take them back", slog.Int("attempt", attempt+1), slog.Any("err", err))
			continue
		}
		var mu sync.Mutex
		var left []part
		s.parallel(ctx, len(todo), func(i int) {
			err := s.open(ctx, todo[i].t, todo[i].p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				taken++
			case errors.Is(err, catalog.ErrOwned), errors.Is(err, catalog.ErrNotFound):
				// Another copy took it meanwhile, or the topic is gone.
			default:
				left = append(left, todo[i])
				s.log.Warn("ingest could not take back a partition", slog.String("topic", todo[i].t.Name), slog.Int("partition", todo[i].p), slog.Any("err", err))
			}
		})
		if todo = left; len(todo) == 0 {
			return taken, 0
		}
	}
	return taken, len(todo)
}

// reclaimAttempts and reclaimBackoff bound reclaim: a partition it cannot
// take back after this many passes (the catalog or the bookies are down)
// is left to the balancing rounds, so start-up does not wait for good.
const (
	reclaimAttempts = 3
	reclaimBackoff  = 500 * time.Millisecond
)

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

// rollOffLeaving asks every running writer to roll over if its ledger
// names a bookie that is draining or missing from the registry
// (partition.Writer.RollOffLeaving), so neither a decommission nor the
// re-replication of a lost bookie's copies waits for partitions that are
// idle or slow to roll.
// Each writer checks against the ledger client's registry listing, read
// at most once per its refresh interval for all of them.
func (s *Service) rollOffLeaving(ctx context.Context) {
	s.mu.Lock()
	var running []*partition.Writer
	for _, sl := range s.writers {
		select {
		case <-sl.ready:
			if sl.err == nil {
				running = append(running, sl.w)
			}
		default:
		}
	}
	s.mu.Unlock()
	for _, w := range running {
		if ctx.Err() != nil {
			return
		}
		if _, err := w.RollOffLeaving(ctx); err != nil {
			s.log.Warn("could not check a partition's ledger for draining or missing bookies", slog.Any("err", err))
			return // the registry is unreachable: the next round tries again
		}
	}
}
