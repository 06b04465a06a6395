package fetch_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/fetch"
)

// wantCode asserts a Connect error's code and its whole message.
func wantCode(t *testing.T, what string, err error, code connect.Code, msg string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code || ce.Message() != msg {
		t.Fatalf("%s: err = %v\nwant %v: %s", what, err, code, msg)
	}
}

// Commits name topics, partitions and offsets that exist: an unknown topic
// or partition is NOT_FOUND, an offset past the high watermark
// OUT_OF_RANGE with the valid range (as Fetch words it), and a refused
// request commits nothing, not even its valid topics. DescribeGroup of a
// group with no members and no offsets is NOT_FOUND. Over Connect.
func TestCommitIsValidated(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "t", 1)
	e.createTopic(t, "u", 2)
	e.produce(t, "t", 0, 0, 1, 1) // t/0 holds one record: valid offsets 0..1
	ctx := context.Background()
	cons := sluicev1connect.NewConsumerServiceClient(h2c, e.url)
	admin := sluicev1connect.NewAdminServiceClient(h2c, e.url)
	commit := func(offs ...*sluicev1.CommitOffset) error {
		_, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: offs}))
		return err
	}
	describe := func(group string) (*sluicev1.DescribeGroupResponse, error) {
		resp, err := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: group}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}

	wantCode(t, "unknown group", func() error { _, err := describe("g"); return err }(), connect.CodeNotFound,
		`group "g" does not exist: it has no live members and no committed offsets`)

	wantCode(t, "unknown topic", commit(&sluicev1.CommitOffset{Topic: "nope", Partition: 0, Offset: 0}), connect.CodeNotFound,
		`offsets[0].topic: topic "nope" does not exist`)
	wantCode(t, "unknown partition", commit(&sluicev1.CommitOffset{Topic: "t", Partition: 0, Offset: 1}, &sluicev1.CommitOffset{Topic: "t", Partition: 5, Offset: 0}), connect.CodeNotFound,
		`offsets[1].partition: topic "t" has no partition 5 (its partitions are 0..0)`)
	// Valid for u, out of range for t: nothing is committed, u neither.
	err := commit(&sluicev1.CommitOffset{Topic: "u", Partition: 1, Offset: 0}, &sluicev1.CommitOffset{Topic: "t", Partition: 0, Offset: 1_000_000})
	wantCode(t, "offset past the end", err, connect.CodeOutOfRange,
		"offsets[1].offset: commit offset 1000000 of t/0 is out of range: valid offsets are 0..1 (log start..high watermark)")
	if ei := errorInfo(err); ei == nil || ei.Reason != fetch.ReasonOutOfRange || ei.Metadata["log_start_offset"] != "0" || ei.Metadata["high_watermark"] != "1" {
		t.Fatalf("ErrorInfo of the out-of-range commit: %v", ei)
	}
	wantCode(t, "after refused commits", func() error { _, err := describe("g"); return err }(), connect.CodeNotFound,
		`group "g" does not exist: it has no live members and no committed offsets`)

	// The ends of the valid range are accepted.
	for _, off := range []int64{0, 1} {
		if err := commit(&sluicev1.CommitOffset{Topic: "t", Partition: 0, Offset: off}); err != nil {
			t.Fatalf("commit %d of 0..1: %v", off, err)
		}
	}
	d, err := describe("g")
	if err != nil || len(d.Partitions) != 1 {
		t.Fatalf("describe after a commit: %v, %v", d, err)
	}
	if gp := d.Partitions[0]; gp.CommittedOffset != 1 || gp.EndOffset != 1 || gp.LogStartOffset != 0 || gp.Lag != 0 ||
		gp.CommittedOffsetState != sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_IN_RANGE {
		t.Fatalf("describe: %v", gp)
	}

	// A member's commit (with its lease epoch) is held to the same rule.
	m := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "h", Topics: []string{"t"}}, false)
	waitFor(t, "the lease", 10*time.Second, func() bool { return m.held() == 1 })
	m.mu.Lock()
	epoch := m.leases["t/0"]
	m.mu.Unlock()
	_, err = cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "h", MemberId: m.id, Offsets: []*sluicev1.CommitOffset{{Topic: "t", Partition: 0, Offset: 2, LeaseEpoch: epoch}}}))
	wantCode(t, "member commit past the end", err, connect.CodeOutOfRange,
		"offsets[0].offset: commit offset 2 of t/0 is out of range: valid offsets are 0..1 (log start..high watermark)")
}

// A commit is judged against the log as it is, not as a copy last saw it:
// a fetch copy whose view of the partition is behind refreshes it before
// refusing, so an offset a consumer just read up to is never refused.
func TestCommitNotRefusedByAStaleView(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 10, 10)
	_, other := e.fetchCopy(t, fetch.Config{}, fetch.Deps{Catalog: e.c.Catalog, Ledgers: e.c.Ledgers, Bookkeeping: e.c.Bookkeeping})
	ctx := context.Background()
	// The other copy learns the partition at 10...
	if _, err := other.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Offset: 0, MaxRecords: 100})); err != nil {
		t.Fatal(err)
	}
	end := int64(10)
	for i := range 20 {
		// ...and is asked to commit each new end right after it was
		// produced elsewhere.
		e.produce(t, "t", 0, int(end), 3, 3)
		end += 3
		if _, err := other.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: []*sluicev1.CommitOffset{{Topic: "t", Partition: 0, Offset: end}}})); err != nil {
			t.Fatalf("round %d: commit of the new end %d: %v", i, end, err)
		}
	}
	if _, err := other.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: []*sluicev1.CommitOffset{{Topic: "t", Partition: 0, Offset: end + 1}}})); connect.CodeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("commit of end+1: %v, want OutOfRange", err)
	}
}

// A committed offset that retention passes is never skipped silently:
// DescribeGroup shows it BELOW_LOG_START, and the member that leases the
// partition continues by its start policy — earliest at the log start,
// latest at the end — and logs the reset. A committed offset past the end
// (stored before commits were checked) shows BEYOND_END, not just "lag 0".
func TestCommittedOffsetBelowLogStart(t *testing.T) {
	warns := &warnRecorder{}
	cfg := smallLedgers()
	cfg.Fetch = groupConfig().Fetch
	cfg.Fetch.Logger = slog.New(warns)
	cfg.Fetch.Log.ChainTTL = 200 * time.Millisecond // how late DescribeGroup may see a trim
	e := startCluster(t, cfg)
	e.createTopic(t, "r", 1)
	const n = 3000
	e.produce(t, "r", 0, 0, n, 50)
	ctx := context.Background()
	cons := sluicev1connect.NewConsumerServiceClient(h2c, e.url)
	admin := sluicev1connect.NewAdminServiceClient(h2c, e.url)
	for _, g := range []string{"early", "late"} {
		if _, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: g, Offsets: []*sluicev1.CommitOffset{{Topic: "r", Partition: 0, Offset: 5}}})); err != nil {
			t.Fatal(err)
		}
	}
	p, sealed := e.sealedLedgers(t, "r", 0)
	np, err := e.c.Catalog.TrimLedgers(ctx, p.TopicID, 0, sealed[1].ID, p.Version)
	if err != nil {
		t.Fatal(err)
	}
	start := np.LogStartOffset
	if start <= 5 {
		t.Fatalf("log start %d after the trim", start)
	}
	// DescribeGroup reads the chain up to ChainTTL old.
	waitFor(t, "DescribeGroup to see the trim", 5*time.Second, func() bool {
		d, err := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "early"}))
		return err == nil && len(d.Msg.Partitions) == 1 && d.Msg.Partitions[0].LogStartOffset == start
	})
	d, _ := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "early"}))
	if gp := d.Msg.Partitions[0]; gp.CommittedOffset != 5 || gp.EndOffset != n ||
		gp.CommittedOffsetState != sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_BELOW_LOG_START {
		t.Fatalf("describe after retention passed the commit: %v", gp)
	}

	first := func(m *member) int64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		lowest := int64(-1)
		for k := range m.records {
			off, _ := strconv.ParseInt(k[strings.LastIndexByte(k, '@')+1:], 10, 64)
			if lowest < 0 || off < lowest {
				lowest = off
			}
		}
		return lowest
	}
	early := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "early", Topics: []string{"r"}, Credits: &sluicev1.Credits{Records: 1 << 20, Bytes: 1 << 30}}, false)
	waitFor(t, "earliest: the records from the log start", 10*time.Second, func() bool { return early.count() == n-int(start) })
	if got := first(early); got != start {
		t.Fatalf("earliest: first record delivered %d, want the log start %d", got, start)
	}
	late := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "late", Topics: []string{"r"}, Start: sluicev1.StartPosition_START_POSITION_LATEST,
		Credits: &sluicev1.Credits{Records: 1 << 20, Bytes: 1 << 30}}, false)
	waitFor(t, "latest: the lease", 10*time.Second, func() bool { return late.held() == 1 })
	waitFor(t, "latest: the reset", 10*time.Second, func() bool {
		for _, w := range warns.all() {
			if strings.Contains(w, "group=late") && strings.Contains(w, "reset by the member's start policy") {
				return true
			}
		}
		return false
	})
	e.produce(t, "r", 0, n, 1, 1)
	waitFor(t, "latest: the next record", 10*time.Second, func() bool { return late.count() == 1 })
	if got := first(late); got != n {
		t.Fatalf("latest: first record delivered %d, want the end %d", got, n)
	}
	for _, want := range []string{
		"group=early member=" + early.id + " topic=r partition=0 offset=5 log_start=" + strconv.FormatInt(start, 10) + " high_watermark=3000 policy=earliest reset_to=" + strconv.FormatInt(start, 10),
		"group=late member=" + late.id + " topic=r partition=0 offset=5 log_start=" + strconv.FormatInt(start, 10) + " high_watermark=3000 policy=latest reset_to=3000",
	} {
		found := false
		for _, w := range warns.all() {
			found = found || strings.Contains(w, want)
		}
		if !found {
			t.Errorf("no warning with %q in %q", want, warns.all())
		}
	}

	// A committed offset past the end, as commits could store before they
	// were checked: described BEYOND_END.
	rt, err := e.c.Catalog.GetTopic(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Bookkeeping.Commit(ctx, bookkeeping.Commit{Group: "old", Topic: "r", TopicID: string(rt.ID), Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 1_000_000}}}); err != nil {
		t.Fatal(err)
	}
	d, err = admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "old"}))
	if err != nil {
		t.Fatal(err)
	}
	if gp := d.Msg.Partitions[0]; gp.CommittedOffset != 1_000_000 || gp.EndOffset != n+1 || gp.Lag != 0 ||
		gp.CommittedOffsetState != sluicev1.CommittedOffsetState_COMMITTED_OFFSET_STATE_BEYOND_END {
		t.Fatalf("describe of a commit past the end: %v", gp)
	}
}

// A topic deleted and created again under the same name is a new
// incarnation: the group's offsets committed for the old one are not its
// offsets (DescribeGroup shows none and the whole new log as lag), and a
// commit lower than the old offset is accepted, not refused as a
// regression (docs/DESIGN.md, "Topic identity").
func TestOffsetsOfADeletedIncarnationAreForgotten(t *testing.T) {
	e := startCluster(t, groupConfig())
	ctx := context.Background()
	cons := sluicev1connect.NewConsumerServiceClient(h2c, e.url)
	admin := sluicev1connect.NewAdminServiceClient(h2c, e.url)
	commit := func(off int64) error {
		_, err := cons.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: "g", Offsets: []*sluicev1.CommitOffset{{Topic: "t", Partition: 0, Offset: off}}}))
		return err
	}
	partition0 := func() *sluicev1.GroupPartition {
		t.Helper()
		d, err := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "g"}))
		if err != nil || len(d.Msg.Partitions) != 1 {
			t.Fatalf("describe: %v, %v", d, err)
		}
		return d.Msg.Partitions[0]
	}
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 5, 5)
	if err := commit(5); err != nil {
		t.Fatal(err)
	}
	if gp := partition0(); gp.CommittedOffset != 5 || gp.Lag != 0 {
		t.Fatalf("before the delete: %v", gp)
	}
	if _, err := admin.DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: "t"})); err != nil {
		t.Fatal(err)
	}
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 2, 2)
	if gp := partition0(); gp.CommittedOffset != bookkeeping.NoOffset || gp.EndOffset != 2 || gp.Lag != 2 {
		t.Fatalf("after the re-create: committed %d, end %d, lag %d; want none, 2, 2", gp.CommittedOffset, gp.EndOffset, gp.Lag)
	}
	if err := commit(1); err != nil {
		t.Fatalf("commit 1 on the new incarnation (5 was committed on the old one): %v", err)
	}
	if gp := partition0(); gp.CommittedOffset != 1 || gp.Lag != 1 {
		t.Fatalf("after a commit on the new incarnation: %v", gp)
	}
}
