package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	peerv1 "github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1"
	"github.com/sluicemq/sluice/services/ingest/txn"
)

// The transaction coordinator's driver (docs/DESIGN.md, "Transactions";
// the decisions are package txn's). Every ingest copy coordinates: a
// request for a transactional id loads its record from bookkeeping, steps
// txn.Step, stores the decision by compare-and-set (a lost race loads and
// decides again), writes the markers the decision asks for — into each
// partition through the copy that writes it — and then stores the
// transaction complete. A copy that dies between deciding and completing
// leaves a Prepare state; the sweeper of any copy finishes it, and aborts
// transactions open past their deadline.

// Reasons of the transaction errors (google.rpc.ErrorInfo, domain
// sluice.dev), as Kafka names them.
const (
	ReasonInvalidProducerIDMapping = "INVALID_PRODUCER_ID_MAPPING"
	ReasonConcurrentTransactions   = "CONCURRENT_TRANSACTIONS"
	ReasonInvalidTxnState          = "INVALID_TXN_STATE"
	// ReasonTxnTimedOut: the transaction was aborted past its timeout;
	// InitProducer naming the session resumes it (KIP-588).
	ReasonTxnTimedOut = "TRANSACTION_TIMED_OUT"
)

// Transaction timeouts: InitProducer's default and bound.
const (
	DefaultTxnTimeout = time.Minute
	MaxTxnTimeout     = 15 * time.Minute
)

// maxCoordinateRounds bounds the compare-and-set races one request runs
// before it answers ABORTED (retry).
const maxCoordinateRounds = 16

// coordinate steps ev for transactional id tid until its decision is
// stored and carried out, and returns it (its Reply and Next are the
// answer; Err is returned as the error). The markers of a decision
// are written, and a commit's offsets applied, before it returns (EndTxn
// answers once the transaction is visible); its Complete is not stored on
// the way: the id's next request here decides on it and stores it with its
// own decision, or completeLater stores it (txnMemo). Errors are txn's (the
// client's answer), bookkeeping's, or the markers' (the transaction stays
// Prepared: the sweeper finishes it).
//
// The state decided on is the one this copy remembers when it has one
// (txnMemo: no read on a transaction's path), else a fresh read. A
// remembered state can be stale, so it only counts through a decision that
// stores — the compare-and-set fails if another copy moved tid on — and a
// decision that stores nothing is made again on a fresh read.
func (s *Service) coordinate(ctx context.Context, tid string, ev txn.Event) (txn.Decision, error) {
	fresh := false // whether to read tid's state rather than use the memo's
	for range maxCoordinateRounds {
		cur, remembered, err := s.txnState(ctx, tid, fresh)
		if err != nil {
			return txn.Decision{}, err
		}
		folded := false
		if done := s.txnMemo.settled(tid, cur); done != nil {
			// A Prepare this copy carried out: decide on its Complete,
			// stored by this decision's compare-and-set (same version).
			cur, folded = done, true
		}
		d := txn.Step(tid, cur, ev)
		if d.NeedProducerID {
			id, err := s.d.Producers.AllocateProducerID(ctx)
			if err != nil {
				return txn.Decision{}, fmt.Errorf("allocate a producer id: %w", err)
			}
			d = txn.Step(tid, cur, txn.WithFreshID(ev, id))
		}
		if d.Store == nil && remembered {
			fresh = true
			continue // nothing stored would check the remembered state: read it
		}
		if d.Store == nil && folded {
			// Nothing of its own to store (a refusal, the sweeper's Expire):
			// store the folded Complete, so the id does not stay Prepare —
			// its deferred completion may have failed, and an Expire
			// decides nothing on a Complete.
			d.Store = cur
		}
		if d.Store != nil {
			sctx, span := s.startTxnSpan(ctx, SpanTxnStore, tid, attribute.Int("sluice.txn.status", int(d.Store.Status)))
			stored, err := s.storeTxn(sctx, *d.Store)
			endProduceSpan(span, err)
			if errors.Is(err, bookkeeping.ErrConflict) {
				s.txnMemo.forget(tid)
				fresh = true
				continue // another coordinator won: decide again on its state
			}
			if err != nil {
				return txn.Decision{}, err
			}
			cur = &stored
		}
		if d.Markers != nil {
			mctx, span := s.startTxnSpan(ctx, SpanTxnMarkers, tid,
				attribute.Bool("sluice.txn.commit", d.Markers.Commit), attribute.Int("sluice.txn.partitions", len(d.Markers.Partitions)))
			err := s.finishTxn(mctx, tid, cur, d.Markers)
			endProduceSpan(span, err)
			if err != nil {
				return txn.Decision{}, err
			}
		}
		if d.Err != nil {
			return txn.Decision{}, d.Err
		}
		return d, nil
	}
	return txn.Decision{}, connect.NewError(connect.CodeAborted, fmt.Errorf("transactional id %q: %d coordinators raced; retry", tid, maxCoordinateRounds))
}

// txnState returns tid's state — the remembered one (remembered true)
// unless fresh, else read from bookkeeping — nil when none is stored.
func (s *Service) txnState(ctx context.Context, tid string, fresh bool) (cur *txn.State, remembered bool, err error) {
	if !fresh {
		if st, ok := s.txnMemo.state(tid); ok {
			return &st, true, nil
		}
	}
	cur, err = s.loadTxn(ctx, tid)
	return cur, false, err
}

// completeTimeout bounds storing a Complete on its own.
const completeTimeout = 30 * time.Second

// finishTxn writes the markers of the Prepare state cur (stored) and
// applies a commit's offsets; the Complete is left to the id's next
// request, or to completeLater.
func (s *Service) finishTxn(ctx context.Context, tid string, cur *txn.State, m *txn.Markers) error {
	if err := s.writeMarkers(ctx, m); err != nil {
		return fmt.Errorf("transactional id %q: write the markers: %w", tid, err)
	}
	if len(m.Offsets) > 0 {
		// After the markers, before Complete: a coordinator that dies in
		// between leaves Prepare, and whoever finishes it applies them
		// again (CommitTxnOffsets is idempotent).
		offs := make([]bookkeeping.TxnOffset, len(m.Offsets))
		for i, o := range m.Offsets {
			offs[i] = bookkeeping.TxnOffset{Group: o.Group, Topic: o.Topic, TopicID: o.TopicID, Partition: o.Partition, Offset: o.Offset}
		}
		if err := s.d.Producers.CommitTxnOffsets(ctx, offs); err != nil {
			return fmt.Errorf("transactional id %q: apply the consumer offsets: %w", tid, err)
		}
	}
	// The transaction is visible now; storing Complete changes nothing a
	// reader or the client sees. The request's context ends with the
	// answer: a Complete stored on its own has a context of its own.
	s.txnMemo.markWritten(tid, cur.Version)
	bg := context.WithoutCancel(ctx)
	s.txnMemo.completeLater(tid, cur.Version, func() {
		cctx, cancel := context.WithTimeout(bg, completeTimeout)
		defer cancel()
		if err := s.completeTxn(cctx, tid, cur); err != nil {
			s.log.Warn("transaction complete not stored; the sweeper finishes it", slog.String("transactional_id", tid), slog.Any("err", err))
		}
	})
	return nil
}

// completeTxn stores the Prepare state cur, carried out, complete. A lost
// compare-and-set means tid moved on — completed by another coordinator,
// or by one that found it Prepare and finished it — and is left alone:
// stepping MarkersWritten on a state read now could complete a later
// transaction whose markers nobody here wrote.
func (s *Service) completeTxn(ctx context.Context, tid string, cur *txn.State) error {
	d := txn.Step(tid, cur, txn.MarkersWritten{})
	if d.Store == nil {
		return nil
	}
	_, err := s.storeTxn(ctx, *d.Store)
	if errors.Is(err, bookkeeping.ErrConflict) {
		s.txnMemo.forget(tid)
		return nil
	}
	return err
}

// maxMarkerWrites bounds the markers one transaction writes at a time.
const maxMarkerWrites = 64

// writeMarkers writes m's marker into each of its partitions, up to
// maxMarkerWrites at a time, and returns the failures.
func (s *Service) writeMarkers(ctx context.Context, m *txn.Markers) error {
	errs := make([]error, len(m.Partitions))
	sem := make(chan struct{}, maxMarkerWrites)
	var wg sync.WaitGroup
	for i, p := range m.Partitions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.writeMarker(ctx, p, m.ProducerID, m.Epoch, m.Commit)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeMarker writes one marker: on this copy's writer of the partition,
// or through the copy that writes it. A topic incarnation that is gone
// needs none.
func (s *Service) writeMarker(ctx context.Context, p txn.Partition, pid int64, epoch int16, commit bool) error {
	t, err := s.topicByID(ctx, catalog.TopicID(p.TopicID))
	if errors.Is(err, catalog.ErrNotFound) {
		return nil // deleted: nothing left to end
	}
	if err != nil {
		return err
	}
	var last error
	for range 3 {
		r, err := s.routeTo(ctx, t, int(p.Partition), false)
		if err != nil {
			return err
		}
		if r.w != nil {
			_, err = r.w.Mark(ctx, pid, epoch, commit)
			return err
		}
		if s.d.Partitions == nil {
			return fmt.Errorf("%s/%d is written by the copy at %s, and this copy has no client for its PartitionService (Deps.Partitions)", t.Name, p.Partition, r.forward)
		}
		_, err = s.d.Partitions(r.forward).WriteMarker(ctx, connect.NewRequest(&peerv1.WriteMarkerRequest{
			Topic: t.Name, TopicId: string(t.ID), Partition: p.Partition, ProducerId: pid, ProducerEpoch: int32(epoch), Commit: commit,
		}))
		if err == nil {
			return nil
		}
		last = err
		if connect.CodeOf(err) != connect.CodeUnavailable {
			return err
		}
		s.forgetRoute(slotKey{t.ID, int(p.Partition)})
	}
	return last
}

// topicByID finds the live topic incarnation id: in the copy's cache of
// topics, else by listing the catalog's (the sweeper's and a coordinator's
// that did not see the topic's produce requests). ErrNotFound when no live
// topic has that id.
func (s *Service) topicByID(ctx context.Context, id catalog.TopicID) (catalog.Topic, error) {
	s.mu.Lock()
	for _, ct := range s.topics {
		if ct.t.ID == id {
			s.mu.Unlock()
			return ct.t, nil
		}
	}
	s.mu.Unlock()
	token := ""
	for {
		page, err := s.d.Catalog.ListTopics(ctx, token, 0)
		if err != nil {
			return catalog.Topic{}, err
		}
		for _, t := range page.Items {
			if t.ID == id {
				return t, nil
			}
		}
		if page.NextPageToken == "" {
			return catalog.Topic{}, fmt.Errorf("topic id %s: %w", id, catalog.ErrNotFound)
		}
		token = page.NextPageToken
	}
}

// loadTxn reads tid's state, and remembers it; nil when none is stored.
func (s *Service) loadTxn(ctx context.Context, tid string) (*txn.State, error) {
	t, err := s.d.Producers.GetTxn(ctx, tid)
	if errors.Is(err, bookkeeping.ErrNotFound) {
		s.txnMemo.forget(tid)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := stateOf(t)
	s.txnMemo.remember(st)
	return &st, nil
}

// storeTxn stores st by compare-and-set on its version, and remembers
// what it stored.
func (s *Service) storeTxn(ctx context.Context, st txn.State) (txn.State, error) {
	t, err := s.d.Producers.PutTxn(ctx, recordOf(st))
	if err != nil {
		return txn.State{}, err
	}
	stored := stateOf(t)
	s.txnMemo.remember(stored)
	return stored, nil
}

func stateOf(t bookkeeping.Txn) txn.State {
	st := txn.State{
		ID: t.TransactionalID, ProducerID: t.ProducerID, Epoch: t.Epoch, Status: txn.Status(t.Status),
		Timeout: t.Timeout, Deadline: t.Deadline, Groups: t.Groups,
		BumpedByCoordinator: t.BumpedByCoordinator, PrevProducerID: t.PrevProducerID, Version: t.Version,
		Ended: txn.Status(t.Ended), TimedOut: t.TimedOut,
	}
	if st.Timeout == 0 {
		st.Timeout = DefaultTxnTimeout // a record only the old InitProducer wrote
	}
	if st.Epoch != 0 || st.BumpedByCoordinator {
		// A replaced id is kept only until the next bump: one left here
		// is a binary's before schema v7, which bumped without clearing it.
		st.PrevProducerID = 0
	}
	for _, p := range t.Partitions {
		st.Partitions = append(st.Partitions, txn.Partition{TopicID: p.TopicID, Partition: p.Partition})
	}
	for _, p := range t.Next {
		st.Next = append(st.Next, txn.Partition{TopicID: p.TopicID, Partition: p.Partition})
	}
	for _, o := range t.Offsets {
		st.Offsets = append(st.Offsets, txn.Offset{Group: o.Group, Topic: o.Topic, TopicID: o.TopicID, Partition: o.Partition, Offset: o.Offset})
	}
	return st
}

func recordOf(st txn.State) bookkeeping.Txn {
	t := bookkeeping.Txn{
		TransactionalID: st.ID, ProducerID: st.ProducerID, Epoch: st.Epoch, Status: bookkeeping.TxnStatus(st.Status),
		Timeout: st.Timeout, Deadline: st.Deadline, Groups: st.Groups,
		BumpedByCoordinator: st.BumpedByCoordinator, PrevProducerID: st.PrevProducerID, Version: st.Version,
		Ended: bookkeeping.TxnStatus(st.Ended), TimedOut: st.TimedOut,
	}
	for _, p := range st.Partitions {
		t.Partitions = append(t.Partitions, bookkeeping.TxnPartition{TopicID: p.TopicID, Partition: p.Partition})
	}
	for _, p := range st.Next {
		t.Next = append(t.Next, bookkeeping.TxnPartition{TopicID: p.TopicID, Partition: p.Partition})
	}
	for _, o := range st.Offsets {
		t.Offsets = append(t.Offsets, bookkeeping.TxnOffset{Group: o.Group, Topic: o.Topic, TopicID: o.TopicID, Partition: o.Partition, Offset: o.Offset})
	}
	return t
}

// txnError maps the coordinator's errors to codes; others go to
// produceError's mapping.
func (s *Service) txnError(err error) error {
	switch {
	case errors.Is(err, txn.ErrFenced):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonProducerFenced, nil)
	case errors.Is(err, txn.ErrTimedOut):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonTxnTimedOut, nil)
	case errors.Is(err, txn.ErrUnknownProducer):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonInvalidProducerIDMapping, nil)
	case errors.Is(err, txn.ErrConcurrent):
		return apierr.WithReason(connect.NewError(connect.CodeAborted, err), ReasonConcurrentTransactions, nil)
	case errors.Is(err, txn.ErrInvalidState):
		return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, err), ReasonInvalidTxnState, nil)
	case errors.Is(err, bookkeeping.ErrConflict):
		return connect.NewError(connect.CodeAborted, fmt.Errorf("%w; retry", err))
	}
	return s.produceError(err)
}

// sweepTxns is one pass of the sweeper over every transactional id: an
// Ongoing transaction past its deadline is aborted, and a Prepare state
// seen at the same version on the previous pass — left by a coordinator
// that died — is finished. seen holds the Prepare versions of the last
// pass, and is replaced.
func (s *Service) sweepTxns(ctx context.Context, seen map[string]int64) (map[string]int64, error) {
	next := make(map[string]int64)
	after := ""
	for {
		page, more, err := s.d.Producers.ListTxns(ctx, after, bookkeeping.MaxTxnListLimit)
		if err != nil {
			return seen, err
		}
		now := s.cfg.Now()
		for _, t := range page {
			after = t.TransactionalID
			st := txn.Status(t.Status)
			switch {
			case st == txn.Ongoing && !now.Before(t.Deadline):
			case st == txn.PrepareCommit || st == txn.PrepareAbort:
				next[t.TransactionalID] = t.Version
				if v, ok := seen[t.TransactionalID]; !ok || v != t.Version {
					continue // maybe a live coordinator's, still writing
				}
			default:
				continue
			}
			if _, err := s.coordinate(ctx, t.TransactionalID, txn.Expire{Now: now}); err != nil {
				s.log.Warn("transaction sweeper", slog.String("transactional_id", t.TransactionalID), slog.Any("err", err))
			}
		}
		if !more {
			return next, nil
		}
	}
}

// runSweeper sweeps every TxnSweepInterval until ctx ends.
func (s *Service) runSweeper(ctx context.Context) {
	if s.d.Producers == nil || s.cfg.TxnSweepInterval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.TxnSweepInterval)
	defer t.Stop()
	var seen map[string]int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		if seen, err = s.sweepTxns(ctx, seen); err != nil && ctx.Err() == nil {
			s.log.Warn("transaction sweeper pass failed", slog.Any("err", err))
		}
	}
}
