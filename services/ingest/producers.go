package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	peerv1 "github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/txn"
)

// InitProducer hands out a producer session (docs/DESIGN.md, "Producer
// identity"): a producer id allocated in bookkeeping, unique across the
// deployment, and its epoch; with a transactional id, the coordinator's
// session of it (a fresh id, or the registered one with the epoch bumped),
// which fences the earlier sessions: their transaction requests answer
// PRODUCER_FENCED, and so do their batches at every partition the new
// session or a marker wrote. A transaction the earlier session left open
// is aborted first (ABORTED, CONCURRENT_TRANSACTIONS: retry once it is).
// Without Deps.Producers it answers UNIMPLEMENTED.
func (s *Service) InitProducer(ctx context.Context, req *connect.Request[sluicev1.InitProducerRequest]) (*connect.Response[sluicev1.InitProducerResponse], error) {
	if s.d.Producers == nil {
		return nil, errNoProducerStore()
	}
	tid := req.Msg.GetTransactionalId()
	if err := bookkeeping.ValidateTransactionalID(tid); err != nil {
		var ve *bookkeeping.ValidationError
		if errors.As(err, &ve) {
			return nil, apierr.Invalid("transactional_id", "%s", ve.Reason)
		}
		return nil, apierr.Invalid("transactional_id", "%v", err)
	}
	timeout := time.Duration(req.Msg.GetTransactionTimeoutMs()) * time.Millisecond
	switch {
	case timeout < 0 || timeout > MaxTxnTimeout:
		return nil, apierr.Invalid("transaction_timeout_ms", "%d outside [0, %d]", req.Msg.GetTransactionTimeoutMs(), MaxTxnTimeout.Milliseconds())
	case timeout == 0:
		timeout = DefaultTxnTimeout
	}
	if tid == "" {
		if req.Msg.GetProducerId() != 0 {
			return nil, apierr.Invalid("producer_id", "a session to resume needs its transactional_id")
		}
		id, err := s.d.Producers.AllocateProducerID(ctx)
		if err != nil {
			return nil, apierr.Otherwise(fmt.Errorf("allocate a producer id: %w", err))
		}
		return connect.NewResponse(&sluicev1.InitProducerResponse{ProducerId: id}), nil
	}
	ev := txn.InitProducer{Timeout: timeout, Now: s.cfg.Now()}
	if pid := req.Msg.GetProducerId(); pid != 0 {
		e := req.Msg.GetProducerEpoch()
		switch {
		case pid < 0:
			return nil, apierr.Invalid("producer_id", "%d; a session's id is ≥ 1 (0: none)", pid)
		case e < 0 || e > txn.MaxEpoch:
			return nil, apierr.Invalid("producer_epoch", "%d outside [0, %d]", e, txn.MaxEpoch)
		}
		ev.Resume = &txn.Reply{ProducerID: pid, Epoch: int16(e)}
	}
	d, err := s.coordinate(ctx, tid, ev)
	if err != nil {
		return nil, s.txnError(err)
	}
	return connect.NewResponse(&sluicev1.InitProducerResponse{ProducerId: d.Reply.ProducerID, ProducerEpoch: int32(d.Reply.Epoch)}), nil
}

func errNoProducerStore() error {
	return connect.NewError(connect.CodeUnimplemented, errors.New("this ingest copy has no producer id store (sluice ingest --cassandra); producers pick their own ids and transactions are not available"))
}

// session checks a request's TxnSession.
func session(sess *sluicev1.TxnSession) (tid string, pid int64, epoch int16, err error) {
	if sess == nil {
		return "", 0, 0, apierr.Invalid("session", "required")
	}
	tid = sess.GetTransactionalId()
	if tid == "" {
		return "", 0, 0, apierr.Invalid("session.transactional_id", "required")
	}
	if err := bookkeeping.ValidateTransactionalID(tid); err != nil {
		return "", 0, 0, apierr.Invalid("session.transactional_id", "%v", err)
	}
	if sess.GetProducerId() < 1 {
		return "", 0, 0, apierr.Invalid("session.producer_id", "%d; InitProducer gives one ≥ 1", sess.GetProducerId())
	}
	if e := sess.GetProducerEpoch(); e < 0 || e > txn.MaxEpoch {
		return "", 0, 0, apierr.Invalid("session.producer_epoch", "%d outside [0, %d]", e, txn.MaxEpoch)
	}
	return tid, sess.GetProducerId(), int16(sess.GetProducerEpoch()), nil
}

// AddPartitionsToTxn adds partitions to the producer's transaction (see
// the RPC's documentation).
func (s *Service) AddPartitionsToTxn(ctx context.Context, req *connect.Request[sluicev1.AddPartitionsToTxnRequest]) (*connect.Response[sluicev1.AddPartitionsToTxnResponse], error) {
	if s.d.Producers == nil {
		return nil, errNoProducerStore()
	}
	tid, pid, epoch, err := session(req.Msg.GetSession())
	if err != nil {
		return nil, err
	}
	topics := req.Msg.GetTopics()
	if len(topics) == 0 {
		return nil, apierr.Invalid("topics", "at least one topic is required")
	}
	parts, err := s.txnPartitions(ctx, "topics", topics)
	if err != nil {
		return nil, err
	}
	if _, err := s.coordinate(ctx, tid, txn.AddPartitions{ProducerID: pid, Epoch: epoch, Partitions: parts, Now: s.cfg.Now()}); err != nil {
		return nil, s.txnError(err)
	}
	s.txnParts.add(pid, epoch, parts)
	return connect.NewResponse(&sluicev1.AddPartitionsToTxnResponse{}), nil
}

// txnPartitions resolves the partitions topics name (the request field
// field) to the live topics' incarnations: at most MaxTxnPartitions.
func (s *Service) txnPartitions(ctx context.Context, field string, topics []*sluicev1.TxnTopic) ([]txn.Partition, error) {
	var parts []txn.Partition
	for i, tp := range topics {
		if len(tp.GetPartitions()) == 0 {
			return nil, apierr.Invalid(fmt.Sprintf("%s[%d].partitions", field, i), "at least one partition is required")
		}
		ct, err := s.topic(ctx, tp.GetTopic())
		if err != nil {
			return nil, apierr.FromCatalog(err)
		}
		for j, p := range tp.GetPartitions() {
			if p < 0 || int(p) >= ct.t.Partitions {
				return nil, apierr.Invalid(fmt.Sprintf("%s[%d].partitions[%d]", field, i, j), "%d outside [0, %d) of topic %q", p, ct.t.Partitions, ct.t.Name)
			}
			parts = append(parts, txn.Partition{TopicID: string(ct.t.ID), Partition: p})
		}
		if len(parts) > bookkeeping.MaxTxnPartitions {
			return nil, apierr.Invalid(field, "more than %d partitions: a transaction holds at most that many", bookkeeping.MaxTxnPartitions)
		}
	}
	return parts, nil
}

// txnTopics names parts by topic, for an answer; a partition whose topic
// incarnation is gone is left out.
func (s *Service) txnTopics(ctx context.Context, parts []txn.Partition) []*sluicev1.TxnTopic {
	var out []*sluicev1.TxnTopic
	byID := map[string]*sluicev1.TxnTopic{}
	for _, p := range parts {
		tt := byID[p.TopicID]
		if tt == nil {
			t, err := s.topicByID(ctx, catalog.TopicID(p.TopicID))
			if err != nil {
				continue
			}
			tt = &sluicev1.TxnTopic{Topic: t.Name}
			byID[p.TopicID] = tt
			out = append(out, tt)
		}
		tt.Partitions = append(tt.Partitions, p.Partition)
	}
	return out
}

// EndTxn commits or aborts the producer's transaction (see the RPC's
// documentation): it answers once every marker is written.
func (s *Service) EndTxn(ctx context.Context, req *connect.Request[sluicev1.EndTxnRequest]) (*connect.Response[sluicev1.EndTxnResponse], error) {
	if s.d.Producers == nil {
		return nil, errNoProducerStore()
	}
	tid, pid, epoch, err := session(req.Msg.GetSession())
	if err != nil {
		return nil, err
	}
	next, err := s.txnPartitions(ctx, "next_partitions", req.Msg.GetNextPartitions())
	if err != nil {
		return nil, err
	}
	d, err := s.endTxn(ctx, tid, txn.EndTxn{ProducerID: pid, Epoch: epoch, Commit: req.Msg.GetCommit(), Next: next, Now: s.cfg.Now()}, time.Now())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.EndTxnResponse{ProducerEpoch: int32(d.Reply.Epoch), ProducerId: d.Reply.ProducerID,
		NextPartitions: s.txnTopics(ctx, d.Next)}), nil
}

// CommitTxn commits the producer's transaction with its last batches (see
// the RPC's documentation): stored first (storeEndBatches), then EndTxn.
func (s *Service) CommitTxn(ctx context.Context, req *connect.Request[sluicev1.CommitTxnRequest]) (*connect.Response[sluicev1.CommitTxnResponse], error) {
	if s.d.Producers == nil {
		return nil, errNoProducerStore()
	}
	tid, pid, epoch, err := session(req.Msg.GetSession())
	if err != nil {
		return nil, err
	}
	since := time.Now()
	next, err := s.txnPartitions(ctx, "next_partitions", req.Msg.GetNextPartitions())
	if err != nil {
		return nil, err
	}
	ev := txn.EndTxn{ProducerID: pid, Epoch: epoch, Commit: true, Next: next, Now: s.cfg.Now()}
	if err := s.storeEndBatches(ctx, req.Header().Get(clientIDHeader), tid, ev, req.Msg.GetProduce()); err != nil {
		return nil, err
	}
	d, err := s.endTxn(ctx, tid, ev, since)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.CommitTxnResponse{ProducerEpoch: int32(d.Reply.Epoch), ProducerId: d.Reply.ProducerID,
		NextPartitions: s.txnTopics(ctx, d.Next)}), nil
}

// endTxn decides ev: the session the producer continues with, and the
// partitions its next transaction is open with — verified for that
// session here from now on (its Prepare stored them; their markers and
// the ended transaction's are written).
func (s *Service) endTxn(ctx context.Context, tid string, ev txn.EndTxn, since time.Time) (txn.Decision, error) {
	d, err := s.coordinate(ctx, tid, ev)
	if err != nil {
		return txn.Decision{}, s.txnError(err)
	}
	if len(d.Next) > 0 {
		s.txnParts.add(d.Reply.ProducerID, d.Reply.Epoch, d.Next)
	}
	s.m.txnEnd(ctx, ev.Commit, since)
	return d, nil
}

// MaxCommitTxnProduce bounds the produce requests one CommitTxn carries.
const MaxCommitTxnProduce = 1000

// storeEndBatches stores the batches a CommitTxn carries as a
// ProduceStream with the transactional id would — verified
// in the transaction, within the buffer budget, charged to the client's
// quota — and returns once all are durable, or the first error. That error
// is the answer and nothing is decided, unless the request is a retry of
// the CommitTxn that decided the transaction (its batches, stored then, may
// now be fenced by the decision's bump): coordinate answers that with the
// outcome.
func (s *Service) storeEndBatches(ctx context.Context, clientID, tid string, ev txn.EndTxn, reqs []*sluicev1.ProduceRequest) error {
	if len(reqs) > MaxCommitTxnProduce {
		return apierr.Invalid("produce", "%d requests; at most %d", len(reqs), MaxCommitTxnProduce)
	}
	pid, epoch := ev.ProducerID, ev.Epoch
	client, err := quotaKey(ctx, clientID, false)
	if err != nil {
		return err
	}
	type started struct {
		pl    *plan
		span  trace.Span
		since time.Time
	}
	var run []started
	var first error
	for i, m := range reqs {
		rctx, span := s.traceProduce(ctx, m) // tracing.go
		pl, err := s.prepare(rctx, m)
		if err == nil {
			err = sessionBatches(fmt.Sprintf("produce[%d]", i), pl, pid, epoch)
		}
		if err == nil {
			err = s.checkTxnBatches(rctx, tid, pl)
		}
		if err == nil {
			err = s.admit(rctx, pl)
		}
		if err != nil {
			endProduceSpan(span, err)
			first = err
			break
		}
		s.start(rctx, pl, false)
		run = append(run, started{pl, span, time.Now()})
	}
	for _, r := range run {
		resp, err := s.finish(ctx, r.pl)
		s.done(r.pl)
		if err == nil {
			s.m.acked(ctx, r.pl, r.since, false)
			err = s.throttle(ctx, client, r.pl, resp)
		}
		if err != nil {
			err = s.produceError(err)
			s.m.failed(ctx, false, err)
		}
		endProduceSpan(r.span, err)
		if err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		return nil
	}
	if cur, err := s.loadTxn(ctx, tid); err == nil && txn.Decided(cur, ev) {
		return nil // a retry of the decided commit: coordinate answers it
	}
	return first
}

// sessionBatches refuses a plan holding anything but transactional
// batches of the producer session (pid, epoch): what a commit may carry.
func sessionBatches(field string, pl *plan, pid int64, epoch int16) error {
	for p, pp := range pl.parts {
		for _, b := range pp.batches {
			if h := batchHeader(b); !h.transactional || h.producerID != pid || h.epoch != epoch {
				return apierr.Invalid(field, "partition %d: a batch that is not a transactional batch of producer id %d at epoch %d (the session's); send other records with Produce", p, pid, epoch)
			}
		}
	}
	return nil
}

// ReasonLeaseFenced is SendOffsetsToTxn's answer for offsets of a
// partition the member does not hold at the epoch given (as the fetch
// service's Commit answers).
const ReasonLeaseFenced = "LEASE_FENCED"

// SendOffsetsToTxn adds consumer offsets to the producer's transaction
// (see the RPC's documentation): every partition's lease must be the
// member's at the epoch given, now; the offsets are applied when the
// transaction commits.
func (s *Service) SendOffsetsToTxn(ctx context.Context, req *connect.Request[sluicev1.SendOffsetsToTxnRequest]) (*connect.Response[sluicev1.SendOffsetsToTxnResponse], error) {
	if s.d.Producers == nil {
		return nil, errNoProducerStore()
	}
	m := req.Msg
	tid, pid, epoch, err := session(m.GetSession())
	if err != nil {
		return nil, err
	}
	if err := bookkeeping.ValidateName("group", m.GetGroup()); err != nil {
		return nil, apierr.Invalid("group", "%v", err)
	}
	if m.GetMemberId() == "" {
		return nil, apierr.Invalid("member_id", "required: the member holding the partitions' leases")
	}
	if n := len(m.GetOffsets()); n == 0 || n > bookkeeping.MaxTxnOffsets {
		return nil, apierr.Invalid("offsets", "%d offsets; 1..%d", n, bookkeeping.MaxTxnOffsets)
	}
	ct, err := s.topic(ctx, m.GetTopic())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	offs := make([]txn.Offset, len(m.GetOffsets()))
	seen := make(map[int32]bool, len(offs))
	for i, o := range m.GetOffsets() {
		field := func(f string) string { return fmt.Sprintf("offsets[%d].%s", i, f) }
		switch {
		case o.GetPartition() < 0 || int(o.GetPartition()) >= ct.t.Partitions:
			return nil, apierr.Invalid(field("partition"), "%d outside [0, %d) of topic %q", o.GetPartition(), ct.t.Partitions, ct.t.Name)
		case seen[o.GetPartition()]:
			return nil, apierr.Invalid(field("partition"), "partition %d is listed twice", o.GetPartition())
		case o.GetOffset() < 0 || o.GetOffset() > bookkeeping.MaxOffset:
			return nil, apierr.Invalid(field("offset"), "%d outside [0, %d]", o.GetOffset(), int64(bookkeeping.MaxOffset))
		case o.GetLeaseEpoch() < 1:
			return nil, apierr.Invalid(field("lease_epoch"), "%d; lease epochs start at 1", o.GetLeaseEpoch())
		}
		seen[o.GetPartition()] = true
		offs[i] = txn.Offset{Group: m.GetGroup(), Topic: ct.t.Name, TopicID: string(ct.t.ID), Partition: o.GetPartition(), Offset: o.GetOffset()}
	}
	leases, err := s.d.Producers.ListLeases(ctx, m.GetGroup(), ct.t.Name)
	if err != nil {
		return nil, apierr.Otherwise(fmt.Errorf("read the leases of group %q on %q: %w", m.GetGroup(), ct.t.Name, err))
	}
	held := make(map[int32]bookkeeping.Lease, len(leases))
	for _, l := range leases {
		held[l.Partition] = l
	}
	var fenced []int32
	for _, o := range m.GetOffsets() {
		if l := held[o.GetPartition()]; l.Owner != m.GetMemberId() || l.Epoch != o.GetLeaseEpoch() {
			fenced = append(fenced, o.GetPartition())
		}
	}
	if len(fenced) > 0 {
		return nil, apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("member %q does not hold partitions %v of %q in group %q at the epochs given: they moved to another member; stop processing them", m.GetMemberId(), fenced, ct.t.Name, m.GetGroup())),
			ReasonLeaseFenced, nil)
	}
	if _, err := s.coordinate(ctx, tid, txn.AddOffsets{ProducerID: pid, Epoch: epoch, Offsets: offs, Now: s.cfg.Now()}); err != nil {
		return nil, s.txnError(err)
	}
	return connect.NewResponse(&sluicev1.SendOffsetsToTxnResponse{}), nil
}

// checkTxnBatches refuses a transactional batch for a partition its
// producer's open transaction has not added (KIP-890's verification): the
// transaction state in bookkeeping must be Ongoing at the batch's producer
// id and epoch with the partition in it. A partition found there is
// remembered for the (producer id, epoch): every EndTxn bumps the epoch,
// so one epoch is one transaction, and once it ends its marker fences the
// epoch's late batches at the partition itself.
func (s *Service) checkTxnBatches(ctx context.Context, tid string, pl *plan) error {
	for p, pp := range pl.parts {
		for _, b := range pp.batches {
			h := batchHeader(b)
			if !h.transactional {
				continue
			}
			if h.epoch == txn.MaxEpoch {
				// Markers need a greater epoch than the data they end.
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: a transactional batch at epoch %d, which only markers use; InitProducer again for a new producer id", txn.ErrFenced, h.epoch)), ReasonProducerFenced, nil)
			}
			key := txnPart{h.producerID, h.epoch, string(pl.topic.ID), int32(p)}
			if s.txnParts.has(key) {
				continue
			}
			if tid == "" {
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("a transactional batch for %s/%d without a transactional id: send it on a ProduceStream whose requests carry transactional_id", pl.topic.Name, p)), ReasonInvalidTxnState, nil)
			}
			if s.d.Producers == nil {
				return errNoProducerStore()
			}
			st, err := s.loadTxn(ctx, tid)
			if err != nil {
				return err
			}
			if done := s.txnMemo.settled(tid, st); done != nil {
				st = done // a Prepare this copy carried out: its Complete
			}
			if st != nil && st.PrevProducerID != 0 && st.PrevProducerID == h.producerID {
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: producer id %d spent its epochs and was replaced by %d", txn.ErrFenced, h.producerID, st.ProducerID)), ReasonProducerFenced, nil)
			}
			if st == nil || st.ProducerID != h.producerID {
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("producer id %d is not transactional id %q's", h.producerID, tid)), ReasonInvalidProducerIDMapping, nil)
			}
			if st.TimedOut && h.epoch == st.Epoch-1 {
				return s.txnError(fmt.Errorf("%w (epoch %d, now %d)", txn.ErrTimedOut, h.epoch, st.Epoch))
			}
			if h.epoch < st.Epoch {
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: epoch %d, current %d", txn.ErrFenced, h.epoch, st.Epoch)), ReasonProducerFenced, nil)
			}
			if (st.Status == txn.PrepareCommit || st.Status == txn.PrepareAbort) && h.epoch == st.Epoch && slices.Contains(st.Next, key.partition()) {
				// Opened by the EndTxn whose markers another copy is
				// writing (or its sweeper will): retry shortly.
				return s.txnError(fmt.Errorf("%w: %q is %v; %s/%d opens its next transaction", txn.ErrConcurrent, tid, st.Status, pl.topic.Name, p))
			}
			if st.Status != txn.Ongoing || h.epoch != st.Epoch || !st.HasPartition(key.partition()) {
				return apierr.WithReason(connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("transactional id %q (epoch %d, %v) has not added %s/%d to a transaction at epoch %d: call AddPartitionsToTxn first", tid, st.Epoch, st.Status, pl.topic.Name, p, h.epoch)), ReasonInvalidTxnState, nil)
			}
			s.txnParts.add(h.producerID, h.epoch, []txn.Partition{key.partition()})
		}
	}
	return nil
}

// PeerHandler returns PartitionService's path and handler: what other
// ingest copies call on this one.
func (s *Service) PeerHandler(opts ...connect.HandlerOption) (string, http.Handler) {
	return peerv1connect.NewPartitionServiceHandler(peer{s}, opts...)
}

// peer serves PartitionService.
type peer struct{ s *Service }

// WriteMarker writes a transaction marker into a partition this copy
// writes (see the RPC's documentation).
func (p peer) WriteMarker(ctx context.Context, req *connect.Request[peerv1.WriteMarkerRequest]) (*connect.Response[peerv1.WriteMarkerResponse], error) {
	s, m := p.s, req.Msg
	if m.GetProducerId() < 0 || m.GetProducerEpoch() < 0 || m.GetProducerEpoch() > txn.MaxEpoch {
		return nil, apierr.Invalid("producer_id", "producer %d epoch %d", m.GetProducerId(), m.GetProducerEpoch())
	}
	ct, err := s.topic(ctx, m.GetTopic())
	if errors.Is(err, catalog.ErrNotFound) || err == nil && string(ct.t.ID) != m.GetTopicId() {
		return connect.NewResponse(&peerv1.WriteMarkerResponse{Offset: -1, Gone: true}), nil
	}
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	if m.GetPartition() < 0 || int(m.GetPartition()) >= ct.t.Partitions {
		return nil, apierr.Invalid("partition", "%d outside [0, %d) of topic %q", m.GetPartition(), ct.t.Partitions, ct.t.Name)
	}
	r, err := s.routeTo(ctx, ct.t, int(m.GetPartition()), true)
	if err != nil {
		return nil, s.produceError(err)
	}
	a, err := r.w.Mark(ctx, m.GetProducerId(), int16(m.GetProducerEpoch()), m.GetCommit())
	if err != nil {
		return nil, s.produceError(err)
	}
	return connect.NewResponse(&peerv1.WriteMarkerResponse{Offset: a.BaseOffset, Duplicate: a.Duplicate}), nil
}

// maxOffsetsPartitions bounds one GetOffsets request (catalog.MaxPageSize:
// AdminService asks for one page of partitions at a time).
const maxOffsetsPartitions = catalog.MaxPageSize

// GetOffsets reports the offsets of the partitions this copy writes (see
// the RPC's documentation). It reads only this copy's writers: no catalog
// call, so a describe asking every owner costs each of them a map lookup
// per partition.
func (p peer) GetOffsets(_ context.Context, req *connect.Request[peerv1.GetOffsetsRequest]) (*connect.Response[peerv1.GetOffsetsResponse], error) {
	m := req.Msg
	if n := len(m.GetPartitions()); n > maxOffsetsPartitions {
		return nil, apierr.Invalid("partitions", "%d partitions in one request, at most %d", n, maxOffsetsPartitions)
	}
	resp := &peerv1.GetOffsetsResponse{Partitions: make([]*peerv1.PartitionOffsets, 0, len(m.GetPartitions()))}
	id := catalog.TopicID(m.GetTopicId())
	for _, part := range m.GetPartitions() {
		po := &peerv1.PartitionOffsets{Partition: part, EndOffset: -1, LastStableOffset: -1}
		if w := p.s.liveWriter(id, int(part)); w != nil {
			// Stable end first: it is at most the end read after it.
			po.LastStableOffset = w.StableEnd()
			po.EndOffset, po.Written = w.AckedEnd(), true
		}
		resp.Partitions = append(resp.Partitions, po)
	}
	return connect.NewResponse(resp), nil
}

// txnHeader is what checkTxnBatches needs of a batch.
type txnHeader struct {
	transactional bool
	producerID    int64
	epoch         int16
}

func batchHeader(b []byte) txnHeader {
	bt := record.Batch(b)
	return txnHeader{transactional: bt.Attributes().Transactional(), producerID: bt.ProducerID(), epoch: bt.ProducerEpoch()}
}

// txnPart is a partition verified in the transaction of (producer id,
// epoch).
type txnPart struct {
	producerID int64
	epoch      int16
	topicID    string
	index      int32
}

func (k txnPart) partition() txn.Partition {
	return txn.Partition{TopicID: k.topicID, Partition: k.index}
}

// maxTxnParts bounds the verified-partition cache; past it, it starts over
// (a miss costs one bookkeeping read).
const maxTxnParts = 100_000

// txnPartCache remembers partitions verified in a transaction. Its own
// lock is a leaf: nothing is called under it.
type txnPartCache struct {
	mu sync.Mutex
	m  map[txnPart]struct{}
}

func (c *txnPartCache) has(k txnPart) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[k]
	return ok
}

func (c *txnPartCache) add(pid int64, epoch int16, parts []txn.Partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(parts) > maxTxnParts {
		c.m = make(map[txnPart]struct{})
	}
	for _, p := range parts {
		c.m[txnPart{pid, epoch, p.TopicID, p.Partition}] = struct{}{}
	}
}
