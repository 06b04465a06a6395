package fetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Group listing limits.
const (
	DefaultGroupPage = 100
	MaxGroupPage     = 1000
	// maxDescribeOffsets bounds the committed offsets DescribeGroup reads.
	maxDescribeOffsets = 100_000
)

// GroupAdmin serves AdminService's group RPCs (services/admin forwards
// them here through admin.Deps.Groups).
type GroupAdmin struct{ s *Service }

// GroupAdmin returns the group half of the admin API.
func (s *Service) GroupAdmin() *GroupAdmin { return &GroupAdmin{s} }

// ListGroups lists groups in name order; the page token is the last name.
func (g *GroupAdmin) ListGroups(ctx context.Context, req *connect.Request[sluicev1.ListGroupsRequest]) (*connect.Response[sluicev1.ListGroupsResponse], error) {
	m := req.Msg
	size := int(m.PageSize)
	if size < 0 || size > MaxGroupPage {
		return nil, apierr.Invalid("page_size", "%d is outside 0..%d", size, MaxGroupPage)
	}
	if size == 0 {
		size = DefaultGroupPage
	}
	if m.PageToken != "" {
		if err := bookkeeping.ValidateName("page_token", m.PageToken); err != nil {
			return nil, bookkeepingErr(err)
		}
	}
	groups, more, err := g.s.d.Bookkeeping.ListGroups(ctx, m.PageToken, size)
	if err != nil {
		return nil, bookkeepingErr(err)
	}
	resp := &sluicev1.ListGroupsResponse{Groups: groups}
	if more && len(groups) > 0 {
		resp.NextPageToken = groups[len(groups)-1]
	}
	return connect.NewResponse(resp), nil
}

// describeParallelism bounds the end-offset lookups DescribeGroup runs at
// once.
const describeParallelism = 16

// DescribeGroup returns a group's live members and, for every partition of
// every topic the group has a lease or an offset on, the owner, epoch,
// committed offset, log start, end offset, lag, and where the committed
// offset stands (CommittedOffsetState).
//
// A group with no live members and no committed offsets is unknown:
// NOT_FOUND. Its lease records, if any, hold no offset and no live owner —
// nothing to describe, and this answer would have listed none of them
// anyway (leases are found through the members' topics and the offsets).
// ListGroups may still list it: it lists every group the store has seen.
func (g *GroupAdmin) DescribeGroup(ctx context.Context, req *connect.Request[sluicev1.DescribeGroupRequest]) (*connect.Response[sluicev1.DescribeGroupResponse], error) {
	s := g.s
	group := req.Msg.Group
	if err := bookkeeping.ValidateName("group", group); err != nil {
		return nil, bookkeepingErr(err)
	}
	members, err := s.d.Bookkeeping.ListMembers(ctx, group)
	if err != nil {
		return nil, bookkeepingErr(err)
	}
	resp := &sluicev1.DescribeGroupResponse{Group: group}
	topics := map[string]bool{}
	for _, m := range members {
		resp.Members = append(resp.Members, &sluicev1.GroupMember{MemberId: m.ID, Client: m.ClientInfo, LastHeartbeatMs: m.LastHeartbeat.UnixMilli()})
		for _, t := range m.Topics {
			topics[t] = true
		}
	}
	var after bookkeeping.Cursor
	committed := 0
	for n := 0; n < maxDescribeOffsets; {
		page, more, err := s.d.Bookkeeping.ListOffsets(ctx, group, after, bookkeeping.MaxListLimit)
		if err != nil {
			return nil, bookkeepingErr(err)
		}
		for _, o := range page {
			topics[o.Topic] = true
		}
		n += len(page)
		committed += len(page)
		if !more || len(page) == 0 {
			break
		}
		after = bookkeeping.Cursor{Topic: page[len(page)-1].Topic, Partition: page[len(page)-1].Partition}
	}
	if len(members) == 0 && committed == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("group %q does not exist: it has no live members and no committed offsets", group))
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	type bound struct {
		gp    *sluicev1.GroupPartition
		topic string
	}
	var bounds []bound
	for _, topic := range names {
		leases, err := s.d.Bookkeeping.ListLeases(ctx, group, topic)
		if err != nil {
			return nil, bookkeepingErr(err)
		}
		t, terr := s.topic(ctx, topic)
		if terr == nil {
			forgetOtherIncarnations(leases, t)
		}
		for _, l := range leases {
			gp := &sluicev1.GroupPartition{Topic: topic, Partition: l.Partition, Owner: l.Owner, Epoch: l.Epoch, CommittedOffset: l.Offset, EndOffset: -1, Lag: -1, LogStartOffset: -1,
				LastStableOffset: -1, StableLag: -1}
			if terr == nil && int(l.Partition) < t.Partitions {
				bounds = append(bounds, bound{gp, topic})
			}
			resp.Partitions = append(resp.Partitions, gp)
		}
	}
	s.lagBounds(ctx, len(bounds), func(i int) (string, int32, int64) {
		return bounds[i].topic, bounds[i].gp.Partition, bounds[i].gp.CommittedOffset
	}, func(i int, b partlog.LagBounds) {
		gp := bounds[i].gp
		gp.LogStartOffset, gp.EndOffset, gp.LastStableOffset = b.Start, b.End, b.Stable
		from := gp.CommittedOffset
		if from < 0 {
			from = b.Start
		}
		gp.Lag, gp.StableLag = max(b.End-from, 0), max(b.Stable-from, 0)
		gp.CommittedOffsetState = offsetState(gp.CommittedOffset, b.Start, b.End)
	})
	return connect.NewResponse(resp), nil
}

// lagBounds looks up the log start and end of n partitions for a lag
// report (part names the i-th and its committed offset; found receives
// each one looked up — a failed lookup leaves that partition's bounds
// unknown). Each may cost a catalog read and a LAC poll, so they run
// describeParallelism at a time rather than one by one (a group over
// hundreds of partitions answered in seconds).
func (s *Service) lagBounds(ctx context.Context, n int, part func(i int) (topic string, partition int32, committed int64), found func(i int, b partlog.LagBounds)) {
	sem := make(chan struct{}, describeParallelism)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			topic, p, committed := part(i)
			b, err := s.logs.BoundsForLag(ctx, topic, int(p))
			if err == nil && committed > b.End {
				// Before calling it beyond the end: the chain read
				// for lag may be a moment old (a roll-over).
				b.Start, b.End, err = s.logs.Bounds(ctx, topic, int(p))
				b.Stable = min(b.Stable, b.End)
			}
			if err == nil {
				found(i, b)
			}
		})
	}
	wg.Wait()
}

// offsetState places a committed offset (bookkeeping.NoOffset: none)
// against a partition's log start..end.
func offsetState(committed, start, end int64) sluicev1.CommittedOffsetState {
	switch {
	case committed == bookkeeping.NoOffset:
		return sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_UNSPECIFIED
	case committed < start:
		return sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_BELOW_LOG_START
	case committed > end:
		return sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_BEYOND_END
	}
	return sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_IN_RANGE
}

// ResetGroupOffsets moves a group's offsets of one topic.
func (g *GroupAdmin) ResetGroupOffsets(ctx context.Context, req *connect.Request[sluicev1.ResetGroupOffsetsRequest]) (*connect.Response[sluicev1.ResetGroupOffsetsResponse], error) {
	s := g.s
	m := req.Msg
	if err := bookkeeping.ValidateName("group", m.Group); err != nil {
		return nil, bookkeepingErr(err)
	}
	t, err := s.partitionOf(ctx, "", m.Topic, 0)
	if err != nil {
		return nil, err
	}
	if m.Position < 0 || m.Position > sluicev1.StartPosition_START_POSITION_TIMESTAMP {
		return nil, apierr.Invalid("position", "unknown position %d", m.Position)
	}
	if m.Position == sluicev1.StartPosition_START_POSITION_UNSPECIFIED && m.Offset < 0 {
		return nil, apierr.Invalid("offset", "%d is negative", m.Offset)
	}
	if m.Position == sluicev1.StartPosition_START_POSITION_TIMESTAMP && m.TimestampMs < 0 {
		return nil, apierr.Invalid("timestamp_ms", "%d is negative", m.TimestampMs)
	}
	parts := slices.Clone(m.Partitions)
	if len(parts) == 0 {
		for p := range t.Partitions {
			parts = append(parts, int32(p))
		}
	}
	slices.Sort(parts)
	if len(parts) > bookkeeping.MaxCommitPartitions {
		return nil, apierr.Invalid("partitions", "has %d entries; at most %d per reset", len(parts), bookkeeping.MaxCommitPartitions)
	}
	members, err := s.d.Bookkeeping.ListMembers(ctx, m.Group)
	if err != nil {
		return nil, bookkeepingErr(err)
	}
	if len(members) > 0 && !m.DryRun {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("group %q has %d live members; stop its consumers before resetting offsets", m.Group, len(members)))
	}
	c := bookkeeping.Commit{Group: m.Group, Topic: m.Topic, TopicID: string(t.ID)}
	resp := &sluicev1.ResetGroupOffsetsResponse{}
	for i, p := range parts {
		if i > 0 && parts[i-1] == p {
			return nil, apierr.Invalid("partitions", "partition %d is listed twice", p)
		}
		if p < 0 || int(p) >= t.Partitions {
			return nil, apierr.Invalid("partitions", "%d is outside the topic's partitions 0..%d", p, t.Partitions-1)
		}
		start, end, err := s.logs.Bounds(ctx, m.Topic, int(p))
		if err != nil {
			return nil, readErr(err)
		}
		var off int64
		switch m.Position {
		case sluicev1.StartPosition_START_POSITION_EARLIEST:
			off = start
		case sluicev1.StartPosition_START_POSITION_LATEST:
			off = end
		case sluicev1.StartPosition_START_POSITION_TIMESTAMP:
			if off, err = s.logs.OffsetForTime(ctx, m.Topic, int(p), m.TimestampMs); err != nil {
				return nil, readErr(err)
			}
		default:
			off = min(max(m.Offset, start), end)
		}
		c.Offsets = append(c.Offsets, bookkeeping.PartitionOffset{Partition: p, Offset: off})
		resp.Partitions = append(resp.Partitions, &sluicev1.GroupPartition{Topic: m.Topic, Partition: p, CommittedOffset: off, EndOffset: end, Lag: end - off,
			LogStartOffset: start, CommittedOffsetState: offsetState(off, start, end), LastStableOffset: -1, StableLag: -1})
	}
	if m.DryRun {
		return connect.NewResponse(resp), nil
	}
	if err := c.ValidateReset(); err != nil {
		return nil, bookkeepingErr(err)
	}
	if err := s.d.Bookkeeping.Reset(ctx, c); err != nil {
		if errors.Is(err, bookkeeping.ErrConflict) {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("group %q has live members; stop its consumers before resetting offsets: %w", m.Group, err))
		}
		return nil, bookkeepingErr(err)
	}
	return connect.NewResponse(resp), nil
}
