package fetch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// The consume side's limits answer like the produce side's: INVALID_ARGUMENT
// worded from the table of limits (internal/apierr), over Connect.
func TestConsumeLimits(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	ctx := context.Background()
	cons := sluicev1connect.NewConsumerServiceClient(h2c, e.url)
	offsets := func(n int, meta string) []*sluicev1.CommitOffset {
		out := make([]*sluicev1.CommitOffset, n)
		for i := range out {
			out[i] = &sluicev1.CommitOffset{Topic: "t", Partition: 0, Offset: 0, Metadata: meta}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		limit apierr.Limit
		want  string
	}{
		{"offsets per commit", func() error {
			_, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: offsets(10_001, "")}))
			return err
		}, apierr.OffsetsPerCommit, "offsets: 10001 offsets is over the server's offsets-per-commit limit of 10000 offsets; commit fewer partitions per call (a server limit)"},
		{"commit metadata", func() error {
			_, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: offsets(1, strings.Repeat("m", 1025))}))
			return err
		}, apierr.CommitMetadataBytes, "offsets[0].metadata: 1025 bytes is over the server's commit metadata size limit of 1024 bytes; store less metadata with the offset (a server limit)"},
		{"request", func() error {
			_, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: offsets(5000, strings.Repeat("m", 1000))}))
			return err
		}, apierr.RequestBytes, "request: "},
		{"topics per session", func() error {
			topics := make([]string, 101)
			for i := range topics {
				topics[i] = "t" + strings.Repeat("x", i)
			}
			st, err := cons.Subscribe(ctx, connect.NewRequest(&sluicev1.SubscribeRequest{Group: "g", Topics: topics}))
			if err != nil {
				return err
			}
			defer st.Close()
			for st.Receive() {
			}
			return st.Err()
		}, apierr.TopicsPerSession, "topics: 101 topics is over the server's topics-per-session limit of 100 topics; subscribe to fewer topics per session (a server limit)"},
		{"client info", func() error {
			st, err := cons.Subscribe(ctx, connect.NewRequest(&sluicev1.SubscribeRequest{Group: "g", Topics: []string{"t"}, ClientInfo: strings.Repeat("c", 1025)}))
			if err != nil {
				return err
			}
			defer st.Close()
			for st.Receive() {
			}
			return st.Err()
		}, apierr.ClientInfoBytes, "client_info: 1025 bytes is over the server's client_info size limit of 1024 bytes; send a shorter client_info (a server limit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.HasPrefix(ce.Message(), tc.want) || !strings.Contains(ce.Message(), tc.limit.Name) {
				t.Fatalf("err = %v\nwant InvalidArgument %q", err, tc.want)
			}
			if apierr.Reason(err) != apierr.ReasonLimitExceeded {
				t.Errorf("reason %q, want %s", apierr.Reason(err), apierr.ReasonLimitExceeded)
			}
		})
	}
	// Nothing was committed.
	admin := sluicev1connect.NewAdminServiceClient(h2c, e.url)
	if d, err := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "g"})); err == nil && len(d.Msg.Partitions) > 0 {
		t.Errorf("refused commits left %v", d.Msg.Partitions)
	}
}
