package fetch

// Commits: ConsumerService.Commit (members' and standalone commits, fenced
// by lease epochs), the checks before a commit is stored, and the mapping
// of bookkeeping's errors to codes (docs/DESIGN.md §2.6; "Topic identity"
// for the incarnation ids offsets carry).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Commit stores a group's offsets, one atomic commit per topic.
func (s *Service) Commit(ctx context.Context, req *connect.Request[sluicev1.CommitRequest]) (*connect.Response[sluicev1.CommitResponse], error) {
	m := req.Msg
	if err := bookkeeping.ValidateName("group", m.Group); err != nil {
		return nil, bookkeepingErr(err)
	}
	if err := notTriggerGroup(m.Group); err != nil {
		return nil, err
	}
	if len(m.Offsets) == 0 {
		return nil, apierr.Invalid("offsets", "must not be empty")
	}
	if len(m.Offsets) > MaxCommitOffsets {
		return nil, apierr.TooLarge("offsets", apierr.OffsetsPerCommit, int64(len(m.Offsets)), MaxCommitOffsets)
	}
	byTopic := map[string][]bookkeeping.PartitionOffset{}
	at := map[string][]int{} // the request index of each of byTopic's offsets
	var order []string
	for i, o := range m.Offsets {
		if o == nil {
			return nil, apierr.Invalid(fmt.Sprintf("offsets[%d]", i), "is empty")
		}
		if len(o.Metadata) > bookkeeping.MaxMetadataBytes {
			return nil, apierr.TooLarge(fmt.Sprintf("offsets[%d].metadata", i), apierr.CommitMetadataBytes, int64(len(o.Metadata)), bookkeeping.MaxMetadataBytes)
		}
		if _, ok := byTopic[o.Topic]; !ok {
			order = append(order, o.Topic)
		}
		byTopic[o.Topic] = append(byTopic[o.Topic], bookkeeping.PartitionOffset{Partition: o.Partition, Offset: o.Offset, Epoch: o.LeaseEpoch, Metadata: o.Metadata})
		at[o.Topic] = append(at[o.Topic], i)
	}
	var ss *session
	if m.MemberId != "" {
		ss = s.sessionOf(m.Group, m.MemberId)
		if ss != nil {
			ss.touch()
		} else if addr := s.forwardTo(m.MemberId, req.Header(), false); addr != "" {
			if resp, ok, err := s.forwardCommit(ctx, addr, req); ok {
				return resp, err
			}
			s.log.Warn("the fetch copy of a member's session is unreachable; applying its commit here (fenced by its lease epochs)",
				slog.String("group", m.Group), slog.String("member", m.MemberId), slog.String("copy", addr))
		}
	}
	// Every topic is checked before any is applied: a request naming a
	// topic, partition or offset that cannot be committed changes nothing.
	commits := make([]bookkeeping.Commit, 0, len(order))
	for _, topic := range order {
		// Offsets are stored with the topic's incarnation: the one this
		// copy knows now (its topic cache, checked by checkCommit). Within
		// TopicCacheTTL of a re-creation a commit meant for the deleted
		// incarnation may be stored under the new one's id; readers then
		// treat any other incarnation's offset as none
		// (forgetOtherIncarnations), so that costs re-delivery, never a
		// skipped record (docs/DESIGN.md, "Topic identity").
		if err := bookkeeping.ValidateName("topic", topic); err != nil {
			return nil, bookkeepingErr(err)
		}
		c := bookkeeping.Commit{Group: m.Group, Topic: topic, Member: m.MemberId, Offsets: byTopic[topic]}
		t, err := s.checkCommit(ctx, c, at[topic])
		if err != nil {
			return nil, err
		}
		c.TopicID = string(t.ID)
		if err := c.Validate(); err != nil {
			return nil, bookkeepingErr(err)
		}
		commits = append(commits, c)
	}
	for _, c := range commits {
		topic := c.Topic
		if err := s.d.Bookkeeping.Commit(ctx, c); err != nil {
			return nil, commitErr(err, c)
		}
		if ss != nil {
			for _, o := range byTopic[topic] {
				ss.release(ctx, tp{Topic: topic, Partition: o.Partition})
			}
		}
	}
	return connect.NewResponse(&sluicev1.CommitResponse{}), nil
}

// forgetOtherIncarnations drops the committed offsets of leases that were
// committed for another incarnation of the topic (deleted, and created
// again under the same name): the new topic starts with no offsets, so a
// member starts where its start policy says rather than at an offset of
// records that no longer exist (docs/DESIGN.md, "Topic identity"). An
// offset stored without an id (committed before offsets carried one) is
// kept.
func forgetOtherIncarnations(leases []bookkeeping.Lease, t catalog.Topic) {
	for i := range leases {
		if l := &leases[i]; l.TopicID != "" && l.TopicID != string(t.ID) {
			l.Offset, l.Metadata, l.TopicID = bookkeeping.NoOffset, "", ""
		}
	}
}

// checkCommit refuses a commit to a topic or partition that does not exist
// (NOT_FOUND) and an offset past the partition's high watermark
// (OUT_OF_RANGE naming the valid range, like Fetch's): the group would then
// skip every record produced until the log reached that offset, and
// DescribeGroup would show no lag. The high watermark is this copy's view
// of the log, the one Fetch reads by, refreshed before a refusal
// (partlog.CheckEnd). Offsets below the log start pass: retention may
// overtake any committed offset anyway, and delivery handles that
// (SubscribeRequest.start). at holds each offset's index in the request.
func (s *Service) checkCommit(ctx context.Context, c bookkeeping.Commit, at []int) (catalog.Topic, error) {
	t, err := s.topic(ctx, c.Topic)
	if errors.Is(err, catalog.ErrNotFound) {
		return t, connect.NewError(connect.CodeNotFound, fmt.Errorf("offsets[%d].topic: topic %q does not exist", at[0], c.Topic))
	}
	if err != nil {
		return t, apierr.FromCatalog(err)
	}
	for i, o := range c.Offsets {
		if int(o.Partition) >= t.Partitions {
			// Partitions may have been added since the topic was cached:
			// read it again before refusing.
			s.forgetTopic(c.Topic)
			if t, err = s.topic(ctx, c.Topic); err != nil {
				return t, apierr.FromCatalog(err)
			}
		}
		if int(o.Partition) >= t.Partitions {
			return t, connect.NewError(connect.CodeNotFound, fmt.Errorf("offsets[%d].partition: topic %q has no partition %d (its partitions are 0..%d)", at[i], c.Topic, o.Partition, t.Partitions-1))
		}
	}
	// Each check is free when the view already reaches the offset (the
	// usual member commit, on the copy that delivered the records); else
	// a catalog read and a LAC poll, so they run a few at a time.
	errs := make([]error, len(c.Offsets))
	sem := make(chan struct{}, describeParallelism)
	var wg sync.WaitGroup
	for i, o := range c.Offsets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.logs.CheckEnd(ctx, c.Topic, int(o.Partition), o.Offset)
		})
	}
	wg.Wait()
	for i, err := range errs {
		var oor *partlog.OutOfRangeError
		switch {
		case errors.As(err, &oor):
			return t, outOfRange(fmt.Sprintf("offsets[%d].offset: commit ", at[i]), oor)
		case err != nil:
			return t, readErr(err)
		}
	}
	return t, nil
}

// ErrorInfo reasons of Commit errors (domain ErrorDomain; metadata "topic"
// and "partitions", comma-separated).
const (
	// ReasonLeaseFenced: FAILED_PRECONDITION; the leases of the named
	// partitions moved (stale epoch): stop processing them, do not retry.
	ReasonLeaseFenced = "LEASE_FENCED"
	// ReasonOffsetRegression: FAILED_PRECONDITION; an offset is lower than
	// the committed one (only ResetGroupOffsets moves offsets back).
	ReasonOffsetRegression = "OFFSET_REGRESSION"
	// ReasonGroupHasMembers: FAILED_PRECONDITION; a standalone commit
	// (no member id) while the group has live members.
	ReasonGroupHasMembers = "GROUP_HAS_MEMBERS"
)

// commitErr maps a commit's error, naming the partitions in ErrorInfo. A
// member's commit that lost a race answers ABORTED (retry).
func commitErr(err error, c bookkeeping.Commit) error {
	var fe *bookkeeping.FencedError
	var re *bookkeeping.OffsetRegressionError
	info := func(code connect.Code, reason string, parts []int32) error {
		ce := connect.NewError(code, err)
		md := map[string]string{"topic": c.Topic}
		if len(parts) > 0 {
			ps := make([]string, len(parts))
			for i, p := range parts {
				ps[i] = strconv.Itoa(int(p))
			}
			md["partitions"] = strings.Join(ps, ",")
		}
		if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md}); derr == nil {
			ce.AddDetail(d)
		}
		return ce
	}
	switch {
	case errors.As(err, &fe):
		return info(connect.CodeFailedPrecondition, ReasonLeaseFenced, fe.Partitions)
	case errors.As(err, &re):
		return info(connect.CodeFailedPrecondition, ReasonOffsetRegression, re.Partitions)
	case errors.Is(err, bookkeeping.ErrConflict) && c.Member == "":
		return info(connect.CodeFailedPrecondition, ReasonGroupHasMembers, nil)
	case errors.Is(err, bookkeeping.ErrConflict):
		return connect.NewError(connect.CodeAborted, err)
	}
	return bookkeepingErr(err)
}

// bookkeepingErr maps bookkeeping errors to codes.
func bookkeepingErr(err error) error {
	var ve *bookkeeping.ValidationError
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &ve):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, bookkeeping.ErrFenced):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, bookkeeping.ErrConflict):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, bookkeeping.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	default:
		return apierr.Otherwise(err)
	}
}
