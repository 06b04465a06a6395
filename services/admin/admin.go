// Package admin serves sluice.v1.AdminService's topic and trigger RPCs over
// the catalog (triggers.go; the fetch service runs triggers and reports
// their runtime state through Deps.TriggerStatus).
// Ingest and fetch both mount it (DESIGN.md §3: any copy answers), so it is a
// library with no state of its own beyond its dependencies. The group RPCs
// (ListGroups, DescribeGroup) belong to the consumer side and answer
// UNIMPLEMENTED until the fetch service provides them through Groups.
package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/catalog"
	peerv1 "github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

// Catalog is what the admin RPCs read and change.
type Catalog interface {
	catalog.Topics
	catalog.Partitions
	// ListLiveOwners gives the owners' addresses (catalog.Owners).
	ListLiveOwners(ctx context.Context) ([]catalog.Owner, error)
	catalog.Ledgers
	// ListLedgersByPartition finds a deleted topic's open ledgers.
	catalog.LedgerLister
	catalog.Triggers
	// ListLiveBookies is the bookie registry (ListUnderReplicatedLedgers).
	ListLiveBookies(ctx context.Context) ([]catalog.Bookie, error)
}

// Deps are the service's dependencies.
type Deps struct {
	Catalog Catalog
	// EndOffset, if set, reports a partition's end offset when the caller
	// knows it better than the catalog (the ingest copy writing it): its
	// high watermark, the offset after the last acknowledged record, which
	// never moves back. The topic is named by its incarnation's id.
	EndOffset func(topic catalog.TopicID, partition int) (int64, bool)
	// StableOffset, if set, reports a partition's last stable offset when
	// the caller writes it (DescribeTopic's last_stable_offset; -1
	// otherwise).
	StableOffset func(topic catalog.TopicID, partition int) (int64, bool)
	// Groups serves the group RPCs once a consumer side exists; nil answers
	// UNIMPLEMENTED.
	Groups GroupsHandler
	// Ledgers seals the open ledgers of a deleted topic, so DeleteTopic
	// answers only once no writer of it can acknowledge anything more.
	// Required.
	Ledgers Ledgers
	// TopicDeleted, if set, is told of a topic this service deleted (after
	// its writers were fenced): the ingest copy serving it drops its
	// writers of that topic at once instead of at their next write.
	TopicDeleted func(catalog.Topic)
	// TriggerStatus, if set, reports a trigger's runtime state for
	// DescribeTrigger (the fetch service's TriggerStatus): its Trigger
	// carries only the state and its message.
	TriggerStatus func(context.Context, catalog.Trigger) (*sluicev1.DescribeTriggerResponse, error)
	// Owners, if set, returns a client for the PartitionService of the
	// ingest copy at an address: describe asks each partition's owner for
	// the offsets this copy does not know itself (EndOffset). Without it,
	// or when the owner does not answer, an open tail's end is reported as
	// a lower bound (PartitionInfo.end_offset_lower_bound).
	Owners func(address string) peerv1connect.PartitionServiceClient
	// Bookies, if set, reaches bookies for DecommissionBookie (the ledger
	// client); without it that RPC answers UNIMPLEMENTED.
	Bookies BookieControl
	// ACLs, if set, stores the access rules of the ACL RPCs; without it
	// they answer UNIMPLEMENTED.
	ACLs catalog.ACLs
	// ACLsChanged, if set, is called after this service changed the ACLs
	// (the authorizer reads them again, so the change holds here at once).
	ACLsChanged func(context.Context)
}

// BookieControl changes a bookie's mode (the ledger client's
// SetBookieDraining).
type BookieControl interface {
	SetBookieDraining(ctx context.Context, id string, draining bool) (client.BookieStatus, error)
}

// Ledgers is the ledger client's recovery: fence a ledger on its bookies
// and close it at its last acknowledged entry.
type Ledgers interface {
	Recover(ctx context.Context, id catalog.LedgerID, lastOffset func(lastEntry int64, payload []byte) (int64, error)) (catalog.LedgerMetadata, error)
}

// GroupsHandler is the consumer-group half of AdminService.
type GroupsHandler interface {
	ListGroups(context.Context, *connect.Request[sluicev1.ListGroupsRequest]) (*connect.Response[sluicev1.ListGroupsResponse], error)
	DescribeGroup(context.Context, *connect.Request[sluicev1.DescribeGroupRequest]) (*connect.Response[sluicev1.DescribeGroupResponse], error)
	ResetGroupOffsets(context.Context, *connect.Request[sluicev1.ResetGroupOffsetsRequest]) (*connect.Response[sluicev1.ResetGroupOffsetsResponse], error)
}

// Service implements sluicev1connect.AdminServiceHandler.
type Service struct{ d Deps }

var _ sluicev1connect.AdminServiceHandler = (*Service)(nil)

// New returns the admin service.
func New(d Deps) (*Service, error) {
	if d.Catalog == nil || d.Ledgers == nil {
		return nil, fmt.Errorf("admin: Deps.Catalog and Deps.Ledgers are required")
	}
	return &Service{d: d}, nil
}

// Handler returns the service's path and handler.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return sluicev1connect.NewAdminServiceHandler(s, opts...)
}

// CreateTopic creates a topic. Config keys are Kafka's names (retention.ms,
// cleanup.policy, max.message.bytes, ...); unknown keys are refused.
func (s *Service) CreateTopic(ctx context.Context, req *connect.Request[sluicev1.CreateTopicRequest]) (*connect.Response[sluicev1.CreateTopicResponse], error) {
	m := req.Msg
	cfg, err := catalog.ParseTopicConfig(m.GetConfig())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	t, err := s.d.Catalog.CreateTopic(ctx, m.GetName(), int(m.GetPartitions()), cfg)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	info, err := s.describe(ctx, t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.CreateTopicResponse{Topic: info}), nil
}

// DeleteTopic deletes a topic and fences its writers before it answers:
// the catalog first marks the topic deleted (from then on no writer can add
// a ledger to its partitions), then every ledger of the topic still open is
// recovered — fenced on its bookies and closed at its last acknowledged
// entry — so no acknowledgement for the deleted topic leaves any ingest
// copy after this answer, whatever their caches hold (docs/DESIGN.md,
// "Topic identity"). A re-created topic of the same name is a new
// incarnation with a new id. The compactor reclaims the data later.
func (s *Service) DeleteTopic(ctx context.Context, req *connect.Request[sluicev1.DeleteTopicRequest]) (*connect.Response[sluicev1.DeleteTopicResponse], error) {
	t, err := s.d.Catalog.DeleteTopic(ctx, req.Msg.GetName())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	if err := s.fenceTopic(ctx, t); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("topic %q is deleted, but not all of its writers could be fenced yet (the compactor fences the rest on its next pass): %w", t.Name, err))
	}
	if s.d.TopicDeleted != nil {
		s.d.TopicDeleted(t)
	}
	return connect.NewResponse(&sluicev1.DeleteTopicResponse{}), nil
}

// fenceParallelism bounds the recoveries DeleteTopic runs at once.
const fenceParallelism = 8

// fenceTopic recovers every open ledger of a deleted topic's partitions.
func (s *Service) fenceTopic(ctx context.Context, t catalog.Topic) error {
	var open []catalog.LedgerID
	for p := range t.Partitions {
		token := ""
		for {
			page, err := s.d.Catalog.ListLedgersByPartition(ctx, t.ID, p, token, catalog.MaxPageSize)
			if err != nil {
				return fmt.Errorf("list ledgers of partition %d: %w", p, err)
			}
			for _, m := range page.Items {
				if !m.State.Sealed() {
					open = append(open, m.ID)
				}
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	errs := make([]error, len(open))
	sem := make(chan struct{}, fenceParallelism)
	var wg sync.WaitGroup
	for i, id := range open {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := s.d.Ledgers.Recover(ctx, id, lastOffsetOf); err != nil {
				errs[i] = fmt.Errorf("fence ledger %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lastOffsetOf is recovery's entry → last offset rule: the last offset of
// the last batch of the entry's payload (ingest packs whole batches).
func lastOffsetOf(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }

// DescribeTopic returns a topic with its partitions' owners and offsets.
func (s *Service) DescribeTopic(ctx context.Context, req *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	t, err := s.d.Catalog.GetTopic(ctx, req.Msg.GetName())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	info, err := s.describe(ctx, t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: info}), nil
}

// ListTopics lists topics in name order, without partition details.
func (s *Service) ListTopics(ctx context.Context, req *connect.Request[sluicev1.ListTopicsRequest]) (*connect.Response[sluicev1.ListTopicsResponse], error) {
	page, err := s.d.Catalog.ListTopics(ctx, req.Msg.GetPageToken(), int(req.Msg.GetPageSize()))
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	resp := &sluicev1.ListTopicsResponse{NextPageToken: page.NextPageToken}
	for _, t := range page.Items {
		resp.Topics = append(resp.Topics, topicInfo(t))
	}
	return connect.NewResponse(resp), nil
}

// ListGroups is served by the consumer side.
func (s *Service) ListGroups(ctx context.Context, req *connect.Request[sluicev1.ListGroupsRequest]) (*connect.Response[sluicev1.ListGroupsResponse], error) {
	if s.d.Groups == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("consumer groups are not served yet (the fetch service provides them)"))
	}
	return s.d.Groups.ListGroups(ctx, req)
}

// DescribeGroup is served by the consumer side.
func (s *Service) DescribeGroup(ctx context.Context, req *connect.Request[sluicev1.DescribeGroupRequest]) (*connect.Response[sluicev1.DescribeGroupResponse], error) {
	if s.d.Groups == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("consumer groups are not served yet (the fetch service provides them)"))
	}
	return s.d.Groups.DescribeGroup(ctx, req)
}

// ResetGroupOffsets is served by the consumer side.
func (s *Service) ResetGroupOffsets(ctx context.Context, req *connect.Request[sluicev1.ResetGroupOffsetsRequest]) (*connect.Response[sluicev1.ResetGroupOffsetsResponse], error) {
	if s.d.Groups == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("consumer groups are not served yet (the fetch service provides them)"))
	}
	return s.d.Groups.ResetGroupOffsets(ctx, req)
}

func topicInfo(t catalog.Topic) *sluicev1.TopicInfo {
	return &sluicev1.TopicInfo{Name: t.Name, Config: t.Config.Map(), CreatedAtMs: t.CreatedAt.UnixMilli(), TopicId: string(t.ID)}
}

// describe adds each partition's owner, epoch and offsets (see offsets).
func (s *Service) describe(ctx context.Context, t catalog.Topic) (*sluicev1.TopicInfo, error) {
	info := topicInfo(t)
	owners, err := s.d.Catalog.ListLiveOwners(ctx)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	addr := make(map[string]string, len(owners))
	for _, o := range owners {
		addr[o.ID] = o.Address
	}
	token := ""
	for {
		page, err := s.d.Catalog.ListPartitions(ctx, t.Name, token, catalog.MaxPageSize)
		if err != nil {
			return nil, apierr.FromCatalog(err)
		}
		offs := s.offsets(ctx, t, page.Items, addr)
		for i, p := range page.Items {
			pi := &sluicev1.PartitionInfo{Partition: int32(p.Index), Epoch: p.Epoch, StartOffset: p.LogStartOffset,
				EndOffset: offs[i].end, LastStableOffset: offs[i].stable, EndOffsetLowerBound: offs[i].lowerBound}
			if a, live := addr[p.Owner]; live && p.Owner != "" {
				// An owner whose heartbeat expired owns nothing: the
				// partition is free (the next produce takes it).
				pi.Owner, pi.OwnerId = a, p.Owner
			}
			info.Partitions = append(info.Partitions, pi)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	return info, nil
}

// partOffsets is what describe reports of a partition's offsets.
type partOffsets struct {
	end        int64
	stable     int64 // -1: unknown
	lowerBound bool  // end is a lower bound
	known      bool  // end and stable come from the partition's writer
}

// ownerTimeout bounds describe's wait for the owners' answers: an owner
// that does not answer in time leaves its partitions to the catalog's
// lower bound, marked as such. A live owner answers from memory (a map
// lookup per partition), so this only bites when one is stopped or cut
// off — and every DescribeTopic (the SDK producer's metadata load too)
// then waits this long, so it is short.
const ownerTimeout = time.Second

// offsets returns each partition's end and last stable offset, from the
// first of these that knows them:
//
//  1. this copy, when it writes the partition (Deps.EndOffset,
//     Deps.StableOffset): exact, and never moving back;
//  2. the partition's live owner, asked through its PartitionService
//     (Deps.Owners; one GetOffsets call per owner, in parallel): exact;
//  3. the catalog: the tail ledger's end once it is sealed (exact), the
//     log start when the partition has no ledger (exact: a writer
//     registers its ledger before it writes), else the open tail's first
//     offset — a lower bound, marked so, never passed off as the end.
func (s *Service) offsets(ctx context.Context, t catalog.Topic, parts []catalog.Partition, addr map[string]string) []partOffsets {
	offs := make([]partOffsets, len(parts))
	byOwner := map[string][]int{} // owner address → indexes into parts
	for i, p := range parts {
		offs[i] = partOffsets{end: p.LogStartOffset, stable: -1}
		if s.d.EndOffset != nil {
			if end, ok := s.d.EndOffset(p.TopicID, p.Index); ok {
				offs[i].end, offs[i].known = end, true
				if s.d.StableOffset != nil {
					if lso, ok := s.d.StableOffset(p.TopicID, p.Index); ok {
						offs[i].stable = lso
					}
				}
				continue
			}
		}
		if a, live := addr[p.Owner]; live && p.Owner != "" && s.d.Owners != nil {
			byOwner[a] = append(byOwner[a], i)
		}
	}
	s.askOwners(ctx, t, parts, byOwner, offs)
	s.catalogEnds(ctx, parts, offs)
	return offs
}

// askOwners fills in offs from each owner's GetOffsets answer; owners that
// fail or do not write a partition leave it unknown.
func (s *Service) askOwners(ctx context.Context, t catalog.Topic, parts []catalog.Partition, byOwner map[string][]int, offs []partOffsets) {
	if len(byOwner) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for a, idx := range byOwner {
		wg.Go(func() {
			req := &peerv1.GetOffsetsRequest{Topic: t.Name, TopicId: string(t.ID)}
			for _, i := range idx {
				req.Partitions = append(req.Partitions, int32(parts[i].Index))
			}
			resp, err := s.d.Owners(a).GetOffsets(ctx, connect.NewRequest(req))
			if err != nil || len(resp.Msg.GetPartitions()) != len(idx) {
				return // the catalog's answer stands, marked if a lower bound
			}
			for k, po := range resp.Msg.GetPartitions() {
				if i := idx[k]; po.GetWritten() && po.GetPartition() == int32(parts[i].Index) {
					offs[i] = partOffsets{end: po.GetEndOffset(), stable: po.GetLastStableOffset(), known: true}
				}
			}
		})
	}
	wg.Wait()
}

// catalogEnds fills in the ends no writer reported, from the catalog (see
// offsets). The tail ledgers of a page of partitions are read with one
// GetLedgers call; when it fails, every open-looking tail stays a lower
// bound.
func (s *Service) catalogEnds(ctx context.Context, parts []catalog.Partition, offs []partOffsets) {
	tail := make([]catalog.LedgerID, len(parts)) // the ledger to read for offs[i]; 0: none
	var tails []catalog.LedgerID
	for i, p := range parts {
		if n := len(p.Ledgers); !offs[i].known && n > 0 {
			offs[i].end, offs[i].lowerBound = p.Ledgers[n-1].FirstOffset, true
			tail[i] = p.Ledgers[n-1].ID
			tails = append(tails, tail[i])
		}
	}
	if len(tails) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ms, err := s.d.Catalog.GetLedgers(ctx, tails)
	if err != nil {
		return
	}
	sealed := make(map[catalog.LedgerID]int64, len(ms))
	for _, m := range ms {
		if m.State.Sealed() {
			sealed[m.ID] = m.LastOffset + 1
		}
	}
	for i, id := range tail {
		if end, ok := sealed[id]; ok { // ledger ids start at 1: none is 0
			offs[i].end, offs[i].lowerBound = end, false
		}
	}
}
