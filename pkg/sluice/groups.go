package sluice

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// ListGroups returns every consumer group name, in order.
func (c *Client) ListGroups(ctx context.Context) ([]string, error) {
	var out []string
	token := ""
	for range maxListPages {
		resp, err := c.groupAdmin.ListGroups(ctx, connect.NewRequest(&sluicev1.ListGroupsRequest{PageSize: 1000, PageToken: token}))
		if err != nil {
			return nil, fmt.Errorf("sluice: list groups: %w", err)
		}
		out = append(out, resp.Msg.GetGroups()...)
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("sluice: list groups: more than %d pages", maxListPages)
}

// DescribeGroup returns a group's live members and, per partition, its
// lease, committed offset and lag.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*sluicev1.DescribeGroupResponse, error) {
	resp, err := c.groupAdmin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: group}))
	if err != nil {
		return nil, fmt.Errorf("sluice: describe group %q: %w", group, err)
	}
	return resp.Msg, nil
}

// ResetOptions narrow Client.ResetGroupOffsets.
type ResetOptions struct {
	// Partitions to reset; empty means all of the topic's partitions.
	Partitions []int32
	// DryRun computes and returns the new offsets without storing them.
	DryRun bool
}

// ResetGroupOffsets moves a group's committed offsets of one topic to a
// Position (an offset is clamped to each partition's valid range), and
// returns the offsets set (or, with DryRun, that would be). The group must
// have no live members: else the error has code FAILED_PRECONDITION.
func (c *Client) ResetGroupOffsets(ctx context.Context, group, topic string, to Position, opts ResetOptions) ([]*sluicev1.GroupPartition, error) {
	if err := to.check(); err != nil {
		return nil, fmt.Errorf("%w: ResetGroupOffsets: %w", ErrInvalidOption, err)
	}
	pos, offset, ts := to.proto()
	resp, err := c.groupAdmin.ResetGroupOffsets(ctx, connect.NewRequest(&sluicev1.ResetGroupOffsetsRequest{
		Group: group, Topic: topic, Partitions: opts.Partitions,
		Position: pos, Offset: offset, TimestampMs: ts, DryRun: opts.DryRun,
	}))
	if err != nil {
		return nil, fmt.Errorf("sluice: reset group %q offsets of topic %q: %w", group, topic, err)
	}
	return resp.Msg.GetPartitions(), nil
}
