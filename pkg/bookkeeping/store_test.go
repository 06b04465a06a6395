package bookkeeping_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// recorder is a Driver that stores nothing: it records each call with its
// arguments and answers with zero values (or err), so a test sees exactly
// what Store hands a backend.
type recorder struct {
	calls []call
	err   error             // returned by every method
	put   []bookkeeping.Txn // the Txns PutTxn was given
}

type call struct {
	method string
	args   []any
}

func (r *recorder) rec(method string, args ...any) error {
	r.calls = append(r.calls, call{method, args})
	return r.err
}

var _ bookkeeping.Driver = (*recorder)(nil)

func (r *recorder) Join(_ context.Context, group string, m bookkeeping.Member) error {
	return r.rec("Join", group, m.ID)
}
func (r *recorder) Heartbeat(_ context.Context, group, member string) error {
	return r.rec("Heartbeat", group, member)
}
func (r *recorder) Leave(_ context.Context, group, member string) error {
	return r.rec("Leave", group, member)
}
func (r *recorder) ListMembers(_ context.Context, group string) ([]bookkeeping.Member, error) {
	return nil, r.rec("ListMembers", group)
}
func (r *recorder) Acquire(_ context.Context, group, topic string, p int32, member string) (int64, error) {
	return 0, r.rec("Acquire", group, topic, p, member)
}
func (r *recorder) Release(_ context.Context, group, topic string, p int32, member string, epoch int64) error {
	return r.rec("Release", group, topic, p, member, epoch)
}
func (r *recorder) ListLeases(_ context.Context, group, topic string) ([]bookkeeping.Lease, error) {
	return nil, r.rec("ListLeases", group, topic)
}
func (r *recorder) Commit(_ context.Context, c bookkeeping.Commit) error {
	return r.rec("Commit", c.Group, c.Member)
}
func (r *recorder) Reset(_ context.Context, c bookkeeping.Commit) error {
	return r.rec("Reset", c.Group)
}
func (r *recorder) FetchOffset(_ context.Context, group, topic string, p int32) (bookkeeping.Committed, error) {
	return bookkeeping.Committed{}, r.rec("FetchOffset", group, topic, p)
}
func (r *recorder) ListOffsets(_ context.Context, group string, after bookkeeping.Cursor, limit int) ([]bookkeeping.GroupOffset, bool, error) {
	return nil, false, r.rec("ListOffsets", group, after, limit)
}
func (r *recorder) CommitTxnOffsets(_ context.Context, offsets []bookkeeping.TxnOffset) error {
	return r.rec("CommitTxnOffsets", len(offsets))
}
func (r *recorder) ListGroups(_ context.Context, after string, limit int) ([]string, bool, error) {
	return nil, false, r.rec("ListGroups", after, limit)
}
func (r *recorder) AllocateProducerID(context.Context) (int64, error) {
	return 0, r.rec("AllocateProducerID")
}
func (r *recorder) InitProducer(_ context.Context, tid string) (bookkeeping.Producer, error) {
	return bookkeeping.Producer{}, r.rec("InitProducer", tid)
}
func (r *recorder) GetTxn(_ context.Context, tid string) (bookkeeping.Txn, error) {
	return bookkeeping.Txn{}, r.rec("GetTxn", tid)
}
func (r *recorder) PutTxn(_ context.Context, t bookkeeping.Txn) (bookkeeping.Txn, error) {
	r.put = append(r.put, t)
	return bookkeeping.Txn{}, r.rec("PutTxn", t.TransactionalID, t.Version)
}
func (r *recorder) ListTxns(_ context.Context, after string, limit int) ([]bookkeeping.Txn, bool, error) {
	return nil, false, r.rec("ListTxns", after, limit)
}
func (r *recorder) Close() error { return r.rec("Close") }

// Valid arguments the cases below start from.
var (
	member = bookkeeping.Member{ID: "m1", SessionTimeout: 10 * time.Second, Topics: []string{"orders"}}
	commit = bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "t1", Member: "m1", Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 5, Epoch: 1}}}
	reset  = bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "t1", Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 5}}}
	after  = bookkeeping.Cursor{Topic: "orders", Partition: 2}
	txn    = bookkeeping.Txn{TransactionalID: "tx", ProducerID: 7, Epoch: 1, Status: bookkeeping.TxnOngoing, Timeout: time.Minute,
		Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Partitions: []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 3}}, Groups: []string{"g"}, Version: 4}
	tooLong   = strings.Repeat("x", bookkeeping.MaxNameBytes+1)
	errNoCall = errors.New("not called")
)

// invalidCall is a Store call with one bad argument.
type invalidCall struct {
	method string // the Store method
	field  string // the *ValidationError's field
	call   func(ctx context.Context, s *bookkeeping.Store) error
}

func err1[T any](_ T, err error) error { return err }

func err2[T, U any](_ T, _ U, err error) error { return err }

var invalidCalls = []invalidCall{
	{"Join", "group", func(ctx context.Context, s *bookkeeping.Store) error { return s.Join(ctx, "", member) }},
	{"Join", "member.session_timeout", func(ctx context.Context, s *bookkeeping.Store) error {
		m := member
		m.SessionTimeout = time.Millisecond
		return s.Join(ctx, "g", m)
	}},
	{"Join", "member.topics", func(ctx context.Context, s *bookkeeping.Store) error {
		m := member
		m.Topics = []string{"a", "a"}
		return s.Join(ctx, "g", m)
	}},
	{"Heartbeat", "group", func(ctx context.Context, s *bookkeeping.Store) error { return s.Heartbeat(ctx, tooLong, "m1") }},
	{"Heartbeat", "member", func(ctx context.Context, s *bookkeeping.Store) error { return s.Heartbeat(ctx, "g", "") }},
	{"Leave", "group", func(ctx context.Context, s *bookkeeping.Store) error { return s.Leave(ctx, "a\x00b", "m1") }},
	{"Leave", "member", func(ctx context.Context, s *bookkeeping.Store) error { return s.Leave(ctx, "g", "\xc3") }},
	{"ListMembers", "group", func(ctx context.Context, s *bookkeeping.Store) error { return err1(s.ListMembers(ctx, "")) }},
	{"Acquire", "partition", func(ctx context.Context, s *bookkeeping.Store) error {
		return err1(s.Acquire(ctx, "g", "orders", -1, "m1"))
	}},
	{"Acquire", "member", func(ctx context.Context, s *bookkeeping.Store) error {
		return err1(s.Acquire(ctx, "g", "orders", 0, ""))
	}},
	{"Release", "topic", func(ctx context.Context, s *bookkeeping.Store) error {
		return s.Release(ctx, "g", "", 0, "m1", 1)
	}},
	{"Release", "epoch", func(ctx context.Context, s *bookkeeping.Store) error {
		return s.Release(ctx, "g", "orders", 0, "m1", 0)
	}},
	{"ListLeases", "group", func(ctx context.Context, s *bookkeeping.Store) error { return err1(s.ListLeases(ctx, "", "orders")) }},
	{"ListLeases", "topic", func(ctx context.Context, s *bookkeeping.Store) error { return err1(s.ListLeases(ctx, "g", "")) }},
	{"Commit", "topicID", func(ctx context.Context, s *bookkeeping.Store) error {
		c := commit
		c.TopicID = ""
		return s.Commit(ctx, c)
	}},
	{"Commit", "offsets[0].epoch", func(ctx context.Context, s *bookkeeping.Store) error {
		c := commit
		c.Offsets = []bookkeeping.PartitionOffset{{Partition: 0, Offset: 5}}
		return s.Commit(ctx, c)
	}},
	{"Reset", "member", func(ctx context.Context, s *bookkeeping.Store) error { return s.Reset(ctx, commit) }},
	{"Reset", "offsets", func(ctx context.Context, s *bookkeeping.Store) error {
		c := reset
		c.Offsets = nil
		return s.Reset(ctx, c)
	}},
	{"FetchOffset", "topic", func(ctx context.Context, s *bookkeeping.Store) error {
		return err1(s.FetchOffset(ctx, "g", tooLong, 0))
	}},
	{"FetchOffset", "partition", func(ctx context.Context, s *bookkeeping.Store) error {
		return err1(s.FetchOffset(ctx, "g", "orders", bookkeeping.MaxPartitions))
	}},
	{"ListOffsets", "group", func(ctx context.Context, s *bookkeeping.Store) error {
		return err2(s.ListOffsets(ctx, "", bookkeeping.Cursor{}, 1))
	}},
	{"ListOffsets", "after.partition", func(ctx context.Context, s *bookkeeping.Store) error {
		return err2(s.ListOffsets(ctx, "g", bookkeeping.Cursor{Topic: "orders", Partition: -1}, 1))
	}},
	{"ListOffsets", "limit", func(ctx context.Context, s *bookkeeping.Store) error {
		return err2(s.ListOffsets(ctx, "g", bookkeeping.Cursor{}, 0))
	}},
	{"ListGroups", "after", func(ctx context.Context, s *bookkeeping.Store) error { return err2(s.ListGroups(ctx, tooLong, 1)) }},
	{"ListGroups", "limit", func(ctx context.Context, s *bookkeeping.Store) error {
		return err2(s.ListGroups(ctx, "", bookkeeping.MaxListLimit+1))
	}},
	{"InitProducer", "transactional_id", func(ctx context.Context, s *bookkeeping.Store) error {
		return err1(s.InitProducer(ctx, "tab\there"))
	}},
	{"GetTxn", "transactional_id", func(ctx context.Context, s *bookkeeping.Store) error { return err1(s.GetTxn(ctx, "")) }},
	{"PutTxn", "txn.transactional_id", func(ctx context.Context, s *bookkeeping.Store) error {
		t := txn
		t.TransactionalID = tooLong
		return err1(s.PutTxn(ctx, t))
	}},
	{"PutTxn", "txn.status", func(ctx context.Context, s *bookkeeping.Store) error {
		t := txn
		t.Status = 0
		return err1(s.PutTxn(ctx, t))
	}},
	{"PutTxn", "txn.partitions[1]", func(ctx context.Context, s *bookkeeping.Store) error {
		t := txn
		t.Partitions = []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 3}, {TopicID: "t1", Partition: 3}}
		return err1(s.PutTxn(ctx, t))
	}},
	{"PutTxn", "txn.groups", func(ctx context.Context, s *bookkeeping.Store) error {
		t := txn
		t.Groups = make([]string, bookkeeping.MaxTxnGroups+1)
		return err1(s.PutTxn(ctx, t))
	}},
	{"CommitTxnOffsets", "offsets", func(ctx context.Context, s *bookkeeping.Store) error { return s.CommitTxnOffsets(ctx, nil) }},
	{"CommitTxnOffsets", "offsets[0].offset", func(ctx context.Context, s *bookkeeping.Store) error {
		return s.CommitTxnOffsets(ctx, []bookkeeping.TxnOffset{{Group: "g", Topic: "orders", TopicID: "t1", Offset: -1}})
	}},
	{"PutTxn", "txn.offsets[1]", func(ctx context.Context, s *bookkeeping.Store) error {
		t := txn
		t.Offsets = []bookkeeping.TxnOffset{{Group: "g", Topic: "o", TopicID: "t1"}, {Group: "g", Topic: "o", TopicID: "t1"}}
		return err1(s.PutTxn(ctx, t))
	}},
	{"ListTxns", "after", func(ctx context.Context, s *bookkeeping.Store) error { return err2(s.ListTxns(ctx, "a\x00", 1)) }},
	{"ListTxns", "limit", func(ctx context.Context, s *bookkeeping.Store) error {
		return err2(s.ListTxns(ctx, "", bookkeeping.MaxTxnListLimit+1))
	}},
}

// unchecked are the Store methods with no argument to check.
var unchecked = []string{"Close", "AllocateProducerID"}

// TestInvalidArgumentsNeverReachTheDriver: for every argument check, a bad
// argument is a *ValidationError naming the field, and the driver is not
// called at all — so a backend never sees, and never needs to check, an
// argument Store would refuse.
func TestInvalidArgumentsNeverReachTheDriver(t *testing.T) {
	for _, tc := range invalidCalls {
		t.Run(tc.method+"/"+tc.field, func(t *testing.T) {
			r := &recorder{err: errNoCall}
			err := tc.call(t.Context(), bookkeeping.New(r))
			var ve *bookkeeping.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if ve.Field != tc.field {
				t.Errorf("field %q (%v), want %q", ve.Field, err, tc.field)
			}
			if len(r.calls) != 0 {
				t.Errorf("the driver was called: %v", r.calls)
			}
		})
	}
}

// TestEveryMethodIsCheckedOrUnchecked: each Store method has invalid cases
// above, or is listed as taking nothing to check — a method added later
// must be put in one of the two.
func TestEveryMethodIsCheckedOrUnchecked(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range invalidCalls {
		covered[tc.method] = true
	}
	for _, m := range unchecked {
		if covered[m] {
			t.Errorf("%s has invalid cases and is listed as unchecked", m)
		}
		covered[m] = true
	}
	for _, m := range methods(reflect.TypeFor[*bookkeeping.Store]()) {
		if !covered[m] {
			t.Errorf("Store.%s has no invalid case and is not listed as unchecked", m)
		}
		delete(covered, m)
	}
	for m := range covered {
		t.Errorf("%s is not a Store method", m)
	}
}

// TestValidArgumentsReachTheDriverOnce: a valid call is one driver call
// with the arguments as given, and its error is returned as the driver made
// it. Every driver method is reached by some call.
func TestValidArgumentsReachTheDriverOnce(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		call func(s *bookkeeping.Store) error
		want call
	}{
		{func(s *bookkeeping.Store) error { return s.Join(ctx, "g", member) }, call{"Join", []any{"g", "m1"}}},
		{func(s *bookkeeping.Store) error { return s.Heartbeat(ctx, "g", "m1") }, call{"Heartbeat", []any{"g", "m1"}}},
		{func(s *bookkeeping.Store) error { return s.Leave(ctx, "g", "m1") }, call{"Leave", []any{"g", "m1"}}},
		{func(s *bookkeeping.Store) error { return err1(s.ListMembers(ctx, "g")) }, call{"ListMembers", []any{"g"}}},
		{func(s *bookkeeping.Store) error { return err1(s.Acquire(ctx, "g", "orders", 3, "m1")) }, call{"Acquire", []any{"g", "orders", int32(3), "m1"}}},
		{func(s *bookkeeping.Store) error { return s.Release(ctx, "g", "orders", 3, "m1", 2) }, call{"Release", []any{"g", "orders", int32(3), "m1", int64(2)}}},
		{func(s *bookkeeping.Store) error { return err1(s.ListLeases(ctx, "g", "orders")) }, call{"ListLeases", []any{"g", "orders"}}},
		{func(s *bookkeeping.Store) error { return s.Commit(ctx, commit) }, call{"Commit", []any{"g", "m1"}}},
		{func(s *bookkeeping.Store) error { return s.Reset(ctx, reset) }, call{"Reset", []any{"g"}}},
		{func(s *bookkeeping.Store) error { return err1(s.FetchOffset(ctx, "g", "orders", 3)) }, call{"FetchOffset", []any{"g", "orders", int32(3)}}},
		{func(s *bookkeeping.Store) error { return err2(s.ListOffsets(ctx, "g", after, 10)) }, call{"ListOffsets", []any{"g", after, 10}}},
		{func(s *bookkeeping.Store) error { return err2(s.ListGroups(ctx, "", 10)) }, call{"ListGroups", []any{"", 10}}},
		{func(s *bookkeeping.Store) error { return err1(s.AllocateProducerID(ctx)) }, call{"AllocateProducerID", nil}},
		{func(s *bookkeeping.Store) error { return err1(s.InitProducer(ctx, "")) }, call{"InitProducer", []any{""}}},
		{func(s *bookkeeping.Store) error { return err1(s.GetTxn(ctx, "tx")) }, call{"GetTxn", []any{"tx"}}},
		{func(s *bookkeeping.Store) error { return err1(s.PutTxn(ctx, txn)) }, call{"PutTxn", []any{"tx", int64(4)}}},
		{func(s *bookkeeping.Store) error { return err2(s.ListTxns(ctx, "tx", 10)) }, call{"ListTxns", []any{"tx", 10}}},
		{func(s *bookkeeping.Store) error {
			return s.CommitTxnOffsets(ctx, []bookkeeping.TxnOffset{{Group: "g", Topic: "orders", TopicID: "t1", Partition: 2, Offset: 7}})
		}, call{"CommitTxnOffsets", []any{1}}},
		{func(s *bookkeeping.Store) error { return s.Close() }, call{"Close", nil}},
	}
	reached := map[string]bool{}
	for _, tc := range cases {
		r := &recorder{err: errNoCall}
		if err := tc.call(bookkeeping.New(r)); err != errNoCall {
			t.Errorf("%s: %v, want the driver's error itself", tc.want.method, err)
		}
		if len(r.calls) != 1 || !reflect.DeepEqual(r.calls[0], tc.want) {
			t.Errorf("driver calls %v, want [%v]", r.calls, tc.want)
		}
		reached[tc.want.method] = true
	}
	for _, m := range methods(reflect.TypeFor[bookkeeping.Driver]()) {
		if !reached[m] {
			t.Errorf("no case reaches Driver.%s", m)
		}
	}
}

// methods lists the exported methods of t (an interface or a pointer type).
func methods(t reflect.Type) []string {
	var out []string
	for m := range t.Methods() {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestPutTxnHandsTheDriverTheStoredForm: the driver gets the Txn as every
// backend stores it (bookkeeping.Txn.Stored): milliseconds, UTC, nil for
// empty lists, and lists of its own, not the caller's.
func TestPutTxnHandsTheDriverTheStoredForm(t *testing.T) {
	r := &recorder{}
	in := txn
	in.Timeout = time.Minute + time.Microsecond
	in.Deadline = time.Date(2026, 1, 2, 4, 4, 5, 999_999, time.FixedZone("X", 3600))
	in.Groups = []string{}
	if _, err := bookkeeping.New(r).PutTxn(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if len(r.put) != 1 || !reflect.DeepEqual(r.put[0], in.Stored()) {
		t.Fatalf("the driver got %+v, want %+v", r.put, in.Stored())
	}
	got := r.put[0]
	if got.Timeout != time.Minute || got.Deadline != txn.Deadline || got.Groups != nil {
		t.Fatalf("the driver got timeout %v, deadline %v, groups %#v; want 1m, %v, nil", got.Timeout, got.Deadline, got.Groups, txn.Deadline)
	}
	got.Partitions[0].Partition = 9
	if in.Partitions[0].Partition != 3 {
		t.Fatal("the driver got the caller's partitions, not a copy")
	}
}
