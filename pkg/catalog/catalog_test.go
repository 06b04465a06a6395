package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// recorder is a Driver that stores nothing: it records each call with its
// arguments and answers with zero values (or err), so a test sees exactly
// what Catalog hands a backend.
type recorder struct {
	calls []call
	err   error // returned by every method

	partitions []catalog.Partition // ListPartitionRange's answer
	more       bool
}

type call struct {
	method string
	args   []any
}

func (r *recorder) rec(method string, args ...any) error {
	r.calls = append(r.calls, call{method, args})
	return r.err
}

var _ catalog.Driver = (*recorder)(nil)

func (r *recorder) CreateTopic(_ context.Context, name string, partitions int, cfg catalog.TopicConfig) (catalog.Topic, error) {
	return catalog.Topic{}, r.rec("CreateTopic", name, partitions, cfg)
}
func (r *recorder) GetTopic(_ context.Context, name string) (catalog.Topic, error) {
	return catalog.Topic{}, r.rec("GetTopic", name)
}
func (r *recorder) ListTopics(_ context.Context, token string, limit int) (catalog.Page[catalog.Topic], error) {
	return catalog.Page[catalog.Topic]{}, r.rec("ListTopics", token, limit)
}
func (r *recorder) UpdateTopicConfig(_ context.Context, name string, cfg catalog.TopicConfig, v int64) (catalog.Topic, error) {
	return catalog.Topic{}, r.rec("UpdateTopicConfig", name, cfg, v)
}
func (r *recorder) AddPartitions(_ context.Context, name string, n int, v int64) (catalog.Topic, error) {
	return catalog.Topic{}, r.rec("AddPartitions", name, n, v)
}
func (r *recorder) DeleteTopic(_ context.Context, name string) (catalog.Topic, error) {
	return catalog.Topic{}, r.rec("DeleteTopic", name)
}
func (r *recorder) ListDeletedTopics(_ context.Context, token string, limit int) (catalog.Page[catalog.Topic], error) {
	return catalog.Page[catalog.Topic]{}, r.rec("ListDeletedTopics", token, limit)
}
func (r *recorder) PurgeDeletedTopic(_ context.Context, id catalog.TopicID) error {
	return r.rec("PurgeDeletedTopic", id)
}
func (r *recorder) GetPartition(_ context.Context, topic string, p int) (catalog.Partition, error) {
	return catalog.Partition{}, r.rec("GetPartition", topic, p)
}
func (r *recorder) ListPartitionRange(_ context.Context, topic string, start, limit int) ([]catalog.Partition, bool, error) {
	return r.partitions, r.more, r.rec("ListPartitionRange", topic, start, limit)
}
func (r *recorder) AcquireWriter(_ context.Context, topic string, p int, owner string) (catalog.Partition, error) {
	return catalog.Partition{}, r.rec("AcquireWriter", topic, p, owner)
}
func (r *recorder) ReleaseWriter(_ context.Context, l catalog.WriterLease) error {
	return r.rec("ReleaseWriter", l)
}
func (r *recorder) AppendLedger(_ context.Context, l catalog.WriterLease, ref catalog.LedgerRef) (catalog.Partition, error) {
	return catalog.Partition{}, r.rec("AppendLedger", l, ref)
}
func (r *recorder) TrimLedgers(_ context.Context, id catalog.TopicID, p int, through catalog.LedgerID, v int64) (catalog.Partition, error) {
	return catalog.Partition{}, r.rec("TrimLedgers", id, p, through, v)
}
func (r *recorder) HeartbeatOwner(_ context.Context, id, addr string, ttl time.Duration) (catalog.Owner, error) {
	return catalog.Owner{}, r.rec("HeartbeatOwner", id, addr, ttl)
}
func (r *recorder) GetOwner(_ context.Context, id string) (catalog.Owner, error) {
	return catalog.Owner{}, r.rec("GetOwner", id)
}
func (r *recorder) ListLiveOwners(context.Context) ([]catalog.Owner, error) {
	return nil, r.rec("ListLiveOwners")
}
func (r *recorder) RemoveOwner(_ context.Context, id string) error { return r.rec("RemoveOwner", id) }
func (r *recorder) CreateLedger(_ context.Context, s catalog.LedgerSpec) (catalog.LedgerMetadata, error) {
	return catalog.LedgerMetadata{}, r.rec("CreateLedger", s)
}
func (r *recorder) GetLedger(_ context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	return catalog.LedgerMetadata{}, r.rec("GetLedger", id)
}
func (r *recorder) GetLedgers(_ context.Context, ids []catalog.LedgerID) ([]catalog.LedgerMetadata, error) {
	return nil, r.rec("GetLedgers", ids)
}
func (r *recorder) UpdateLedger(_ context.Context, m catalog.LedgerMetadata) (catalog.LedgerMetadata, error) {
	return catalog.LedgerMetadata{}, r.rec("UpdateLedger", m.ID)
}
func (r *recorder) DeleteLedgerMetadata(_ context.Context, id catalog.LedgerID, v int64) error {
	return r.rec("DeleteLedgerMetadata", id, v)
}
func (r *recorder) ListLedgersByPartition(_ context.Context, id catalog.TopicID, p int, token string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return catalog.Page[catalog.LedgerMetadata]{}, r.rec("ListLedgersByPartition", id, p, token, limit)
}
func (r *recorder) ListLedgersByState(_ context.Context, s catalog.LedgerState, token string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return catalog.Page[catalog.LedgerMetadata]{}, r.rec("ListLedgersByState", s, token, limit)
}
func (r *recorder) HeartbeatBookie(_ context.Context, b catalog.Bookie, ttl time.Duration) (catalog.Bookie, error) {
	return catalog.Bookie{}, r.rec("HeartbeatBookie", b.ID, ttl)
}
func (r *recorder) ListLiveBookies(context.Context) ([]catalog.Bookie, error) {
	return nil, r.rec("ListLiveBookies")
}
func (r *recorder) RemoveBookie(_ context.Context, id string) error { return r.rec("RemoveBookie", id) }
func (r *recorder) CreateTrigger(_ context.Context, name string, s catalog.TriggerSpec) (catalog.Trigger, error) {
	return catalog.Trigger{}, r.rec("CreateTrigger", name, s)
}
func (r *recorder) GetTrigger(_ context.Context, name string) (catalog.Trigger, error) {
	return catalog.Trigger{}, r.rec("GetTrigger", name)
}
func (r *recorder) ListTriggers(_ context.Context, token string, limit int) (catalog.Page[catalog.Trigger], error) {
	return catalog.Page[catalog.Trigger]{}, r.rec("ListTriggers", token, limit)
}
func (r *recorder) UpdateTrigger(_ context.Context, name string, s catalog.TriggerSpec, v int64) (catalog.Trigger, error) {
	return catalog.Trigger{}, r.rec("UpdateTrigger", name, s, v)
}
func (r *recorder) DeleteTrigger(_ context.Context, name string) (catalog.Trigger, error) {
	return catalog.Trigger{}, r.rec("DeleteTrigger", name)
}
func (r *recorder) RegisterSchema(_ context.Context, subject string, rec catalog.SchemaRecord, expect int) (catalog.SubjectVersion, error) {
	return catalog.SubjectVersion{}, r.rec("RegisterSchema", subject, rec.Schema, expect)
}
func (r *recorder) GetSchema(_ context.Context, id int64) (catalog.SchemaRecord, error) {
	return catalog.SchemaRecord{}, r.rec("GetSchema", id)
}
func (r *recorder) ListSubjectVersions(_ context.Context, subject string, deleted bool) (catalog.SubjectVersions, error) {
	return catalog.SubjectVersions{}, r.rec("ListSubjectVersions", subject, deleted)
}
func (r *recorder) ListSubjects(_ context.Context, deleted bool, token string, limit int) (catalog.Page[string], error) {
	return catalog.Page[string]{}, r.rec("ListSubjects", deleted, token, limit)
}
func (r *recorder) DeleteSubjectVersion(_ context.Context, subject string, version int, permanent bool) (catalog.SubjectVersion, error) {
	return catalog.SubjectVersion{}, r.rec("DeleteSubjectVersion", subject, version, permanent)
}
func (r *recorder) GetCompatibility(_ context.Context, subject string) (string, error) {
	return "", r.rec("GetCompatibility", subject)
}
func (r *recorder) SetCompatibility(_ context.Context, subject, level string) error {
	return r.rec("SetCompatibility", subject, level)
}
func (r *recorder) PutACLs(_ context.Context, acls []catalog.ACL) error {
	return r.rec("PutACLs", acls)
}
func (r *recorder) RemoveACLs(_ context.Context, acls []catalog.ACL) error {
	return r.rec("RemoveACLs", acls)
}
func (r *recorder) AllACLs(context.Context) ([]catalog.ACL, error) { return nil, r.rec("AllACLs") }
func (r *recorder) Close() error                                   { return r.rec("Close") }

// Valid arguments the cases below start from.
var (
	lease     = catalog.WriterLease{Topic: "orders", TopicID: "t1", Partition: 3, Owner: "ingest-1", Epoch: 2}
	spec      = catalog.LedgerSpec{Topic: "orders", TopicID: "t1", Partition: 3, Replication: catalog.Replication{Ensemble: 1, WriteQuorum: 1, AckQuorum: 1}, Ensemble: []string{"b1"}, WriterOwner: "ingest-1", WriterEpoch: 2}
	bookie    = catalog.Bookie{ID: "b1", Address: "10.0.0.1:3181", FreeBytes: 1, TotalBytes: 2}
	trigger   = catalog.TriggerSpec{Topic: "orders", Function: "fn"}
	schemaRec = catalog.SchemaRecord{Format: "AVRO", Schema: `"string"`}
	ttl       = time.Second
	cfg       = catalog.DefaultTopicConfig()
)

// invalidCall is a Catalog call with one bad argument.
type invalidCall struct {
	method string // the Catalog method
	field  string // the *ValidationError's field
	call   func(ctx context.Context, c *catalog.Catalog) error
}

func err1[T any](_ T, err error) error { return err }

var goodACL = catalog.ACL{Principal: "User:alice", ResourceType: catalog.ResourceTopic, PatternType: catalog.PatternPrefix,
	ResourceName: "orders.", Operation: catalog.OpProduce, Permission: catalog.Allow}

var invalidCalls = []invalidCall{
	{"CreateACLs", "principal", func(ctx context.Context, c *catalog.Catalog) error {
		bad := goodACL
		bad.Principal = "alice"
		return c.CreateACLs(ctx, []catalog.ACL{goodACL, bad})
	}},
	{"CreateACLs", "acls", func(ctx context.Context, c *catalog.Catalog) error {
		return c.CreateACLs(ctx, make([]catalog.ACL, catalog.MaxACLsPerCall+1))
	}},
	{"DeleteACLs", "operation", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.DeleteACLs(ctx, catalog.ACLFilter{Operation: "write"}))
	}},
	{"ListACLs", "resource_type", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListACLs(ctx, catalog.ACLFilter{ResourceType: "table"}))
	}},
	{"CreateTopic", "name", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.CreateTopic(ctx, "a/b", 1, cfg))
	}},
	{"CreateTopic", "partitions", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.CreateTopic(ctx, "orders", 0, cfg))
	}},
	{"CreateTopic", "retention.ms", func(ctx context.Context, c *catalog.Catalog) error {
		bad := cfg
		bad.RetentionMs = 0
		return err1(c.CreateTopic(ctx, "orders", 1, bad))
	}},
	{"GetTopic", "name", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.GetTopic(ctx, "")) }},
	{"ListTopics", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListTopics(ctx, "", catalog.MaxPageSize+1))
	}},
	{"UpdateTopicConfig", "name", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.UpdateTopicConfig(ctx, "..", cfg, 1))
	}},
	{"UpdateTopicConfig", "max.message.bytes", func(ctx context.Context, c *catalog.Catalog) error {
		bad := cfg
		bad.MaxMessageBytes = 0
		return err1(c.UpdateTopicConfig(ctx, "orders", bad, 1))
	}},
	{"AddPartitions", "name", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.AddPartitions(ctx, "", 2, 1))
	}},
	{"AddPartitions", "partitions", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.AddPartitions(ctx, "orders", catalog.MaxPartitions+1, 1))
	}},
	{"DeleteTopic", "name", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.DeleteTopic(ctx, "a b")) }},
	{"ListDeletedTopics", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListDeletedTopics(ctx, "", -1))
	}},
	{"PurgeDeletedTopic", "topicID", func(ctx context.Context, c *catalog.Catalog) error { return c.PurgeDeletedTopic(ctx, "") }},
	{"GetPartition", "name", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.GetPartition(ctx, "", 0)) }},
	{"GetPartition", "partition", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.GetPartition(ctx, "orders", -1))
	}},
	{"ListPartitions", "name", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListPartitions(ctx, "", "", 0))
	}},
	{"ListPartitions", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListPartitions(ctx, "orders", "", -1))
	}},
	{"ListPartitions", "pageToken", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListPartitions(ctx, "orders", "not a token", 0))
	}},
	{"AcquireWriter", "partition", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.AcquireWriter(ctx, "orders", catalog.MaxPartitions, "ingest-1"))
	}},
	{"AcquireWriter", "owner", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.AcquireWriter(ctx, "orders", 0, "has space"))
	}},
	{"ReleaseWriter", "epoch", func(ctx context.Context, c *catalog.Catalog) error {
		l := lease
		l.Epoch = 0
		return c.ReleaseWriter(ctx, l)
	}},
	{"AppendLedger", "topicID", func(ctx context.Context, c *catalog.Catalog) error {
		l := lease
		l.TopicID = ""
		return err1(c.AppendLedger(ctx, l, catalog.LedgerRef{ID: 1}))
	}},
	{"TrimLedgers", "topicID", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.TrimLedgers(ctx, "", 0, 1, 1))
	}},
	{"TrimLedgers", "partition", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.TrimLedgers(ctx, "t1", -1, 1, 1))
	}},
	{"HeartbeatOwner", "address", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.HeartbeatOwner(ctx, "ingest-1", "", ttl))
	}},
	{"HeartbeatOwner", "ttl", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.HeartbeatOwner(ctx, "ingest-1", "h:1", time.Hour))
	}},
	{"GetOwner", "id", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.GetOwner(ctx, "")) }},
	{"RemoveOwner", "id", func(ctx context.Context, c *catalog.Catalog) error {
		return c.RemoveOwner(ctx, strings.Repeat("x", catalog.MaxIDLength+1))
	}},
	{"CreateLedger", "writerEpoch", func(ctx context.Context, c *catalog.Catalog) error {
		s := spec
		s.WriterEpoch = 0
		return err1(c.CreateLedger(ctx, s))
	}},
	{"CreateLedger", "ensembles", func(ctx context.Context, c *catalog.Catalog) error {
		s := spec
		s.Ensemble = []string{"b1", "b2"}
		return err1(c.CreateLedger(ctx, s))
	}},
	{"GetLedgers", "ids", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.GetLedgers(ctx, make([]catalog.LedgerID, catalog.MaxPageSize+1)))
	}},
	{"ListLedgersByPartition", "topicID", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListLedgersByPartition(ctx, "", 0, "", 0))
	}},
	{"ListLedgersByPartition", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListLedgersByPartition(ctx, "t1", 0, "", catalog.MaxPageSize+1))
	}},
	{"ListLedgersByState", "state", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListLedgersByState(ctx, 0, "", 0))
	}},
	{"ListLedgersByState", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListLedgersByState(ctx, catalog.LedgerOpen, "", -5))
	}},
	{"HeartbeatBookie", "freeBytes", func(ctx context.Context, c *catalog.Catalog) error {
		b := bookie
		b.FreeBytes = 3
		return err1(c.HeartbeatBookie(ctx, b, ttl))
	}},
	{"RemoveBookie", "id", func(ctx context.Context, c *catalog.Catalog) error { return c.RemoveBookie(ctx, "") }},
	{"CreateTrigger", "function", func(ctx context.Context, c *catalog.Catalog) error {
		s := trigger
		s.Function = "not a function"
		return err1(c.CreateTrigger(ctx, "t", s))
	}},
	{"GetTrigger", "name", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.GetTrigger(ctx, "")) }},
	{"ListTriggers", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListTriggers(ctx, "", catalog.MaxPageSize+1))
	}},
	{"UpdateTrigger", "batch_size", func(ctx context.Context, c *catalog.Catalog) error {
		s := trigger
		s.BatchSize = catalog.MaxTriggerBatchSize + 1
		return err1(c.UpdateTrigger(ctx, "t", s, 1))
	}},
	{"DeleteTrigger", "name", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.DeleteTrigger(ctx, ".")) }},
	{"RegisterSchema", "subject", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.RegisterSchema(ctx, "a b", schemaRec, 0))
	}},
	{"RegisterSchema", "format", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.RegisterSchema(ctx, "s", catalog.SchemaRecord{Format: "XML", Schema: "x"}, 0))
	}},
	{"RegisterSchema", "expectLatest", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.RegisterSchema(ctx, "s", schemaRec, -1))
	}},
	{"GetSchema", "id", func(ctx context.Context, c *catalog.Catalog) error { return err1(c.GetSchema(ctx, 0)) }},
	{"ListSubjectVersions", "subject", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListSubjectVersions(ctx, "", false))
	}},
	{"ListSubjects", "limit", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.ListSubjects(ctx, false, "", -1))
	}},
	{"DeleteSubjectVersion", "version", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.DeleteSubjectVersion(ctx, "s", 0, false))
	}},
	{"DeleteSubjectVersion", "subject", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.DeleteSubjectVersion(ctx, "a\tb", 1, false))
	}},
	{"GetCompatibility", "subject", func(ctx context.Context, c *catalog.Catalog) error {
		return err1(c.GetCompatibility(ctx, "a b"))
	}},
	{"SetCompatibility", "compatibility", func(ctx context.Context, c *catalog.Catalog) error {
		return c.SetCompatibility(ctx, "", "SIDEWAYS")
	}},
}

// unchecked are the Catalog methods with no argument to check: the driver
// decides them on stored state (a ledger id that does not exist is
// ErrNotFound; UpdateLedger and DeleteLedgerMetadata are rules on the
// stored record, NextLedger and CheckDeletable).
var unchecked = []string{"Close", "GetLedger", "UpdateLedger", "DeleteLedgerMetadata", "ListLiveOwners", "ListLiveBookies"}

// TestInvalidArgumentsNeverReachTheDriver: for every argument check, a bad
// argument is a *ValidationError naming the field, and the driver is not
// called at all — so a backend never sees, and never needs to check, an
// argument Catalog would refuse.
func TestInvalidArgumentsNeverReachTheDriver(t *testing.T) {
	for _, tc := range invalidCalls {
		t.Run(tc.method+"/"+tc.field, func(t *testing.T) {
			r := &recorder{}
			err := tc.call(t.Context(), catalog.New(r))
			var ve *catalog.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, catalog.ErrInvalid) {
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

// TestEveryMethodIsCheckedOrUnchecked: each Catalog method has invalid
// cases above, or is listed as taking nothing to check — a method added
// later must be put in one of the two.
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
	for _, m := range methods(reflect.TypeFor[*catalog.Catalog]()) {
		if !covered[m] {
			t.Errorf("Catalog.%s has no invalid case and is not listed as unchecked", m)
		}
		delete(covered, m)
	}
	for m := range covered {
		t.Errorf("%s is not a Catalog method", m)
	}
}

// TestValidArgumentsReachTheDriverOnce: a valid call is one driver call
// with the arguments as given, except what Catalog resolves: a page limit
// of 0 (DefaultPageSize), GetLedgers' ids (sorted, each once) and
// ListPartitions' page token (the start index). Every driver method is
// reached by some call.
func TestValidArgumentsReachTheDriverOnce(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		call func(c *catalog.Catalog) error
		want call
	}{
		{func(c *catalog.Catalog) error { return err1(c.CreateTopic(ctx, "orders", 4, cfg)) }, call{"CreateTopic", []any{"orders", 4, cfg}}},
		{func(c *catalog.Catalog) error { return err1(c.GetTopic(ctx, "orders")) }, call{"GetTopic", []any{"orders"}}},
		{func(c *catalog.Catalog) error { return err1(c.ListTopics(ctx, "tok", 0)) }, call{"ListTopics", []any{"tok", catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return err1(c.ListTopics(ctx, "", 7)) }, call{"ListTopics", []any{"", 7}}},
		{func(c *catalog.Catalog) error { return err1(c.UpdateTopicConfig(ctx, "orders", cfg, 3)) }, call{"UpdateTopicConfig", []any{"orders", cfg, int64(3)}}},
		{func(c *catalog.Catalog) error { return err1(c.AddPartitions(ctx, "orders", 8, 3)) }, call{"AddPartitions", []any{"orders", 8, int64(3)}}},
		{func(c *catalog.Catalog) error { return err1(c.DeleteTopic(ctx, "orders")) }, call{"DeleteTopic", []any{"orders"}}},
		{func(c *catalog.Catalog) error { return err1(c.ListDeletedTopics(ctx, "", 0)) }, call{"ListDeletedTopics", []any{"", catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return c.PurgeDeletedTopic(ctx, "t1") }, call{"PurgeDeletedTopic", []any{catalog.TopicID("t1")}}},
		{func(c *catalog.Catalog) error { return err1(c.GetPartition(ctx, "orders", 3)) }, call{"GetPartition", []any{"orders", 3}}},
		{func(c *catalog.Catalog) error { return err1(c.ListPartitions(ctx, "orders", catalog.IndexToken(5), 0)) }, call{"ListPartitionRange", []any{"orders", 5, catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return err1(c.AcquireWriter(ctx, "orders", 3, "ingest-1")) }, call{"AcquireWriter", []any{"orders", 3, "ingest-1"}}},
		{func(c *catalog.Catalog) error { return c.ReleaseWriter(ctx, lease) }, call{"ReleaseWriter", []any{lease}}},
		{func(c *catalog.Catalog) error { return err1(c.AppendLedger(ctx, lease, catalog.LedgerRef{ID: 9})) }, call{"AppendLedger", []any{lease, catalog.LedgerRef{ID: 9}}}},
		{func(c *catalog.Catalog) error { return err1(c.TrimLedgers(ctx, "t1", 3, 9, 4)) }, call{"TrimLedgers", []any{catalog.TopicID("t1"), 3, catalog.LedgerID(9), int64(4)}}},
		{func(c *catalog.Catalog) error { return err1(c.HeartbeatOwner(ctx, "ingest-1", "h:1", ttl)) }, call{"HeartbeatOwner", []any{"ingest-1", "h:1", ttl}}},
		{func(c *catalog.Catalog) error { return err1(c.GetOwner(ctx, "ingest-1")) }, call{"GetOwner", []any{"ingest-1"}}},
		{func(c *catalog.Catalog) error { return err1(c.ListLiveOwners(ctx)) }, call{"ListLiveOwners", nil}},
		{func(c *catalog.Catalog) error { return c.RemoveOwner(ctx, "ingest-1") }, call{"RemoveOwner", []any{"ingest-1"}}},
		{func(c *catalog.Catalog) error { return err1(c.CreateLedger(ctx, spec)) }, call{"CreateLedger", []any{spec}}},
		{func(c *catalog.Catalog) error { return err1(c.GetLedger(ctx, -1)) }, call{"GetLedger", []any{catalog.LedgerID(-1)}}},
		{func(c *catalog.Catalog) error { return err1(c.GetLedgers(ctx, []catalog.LedgerID{7, 2, 7, 5})) }, call{"GetLedgers", []any{[]catalog.LedgerID{2, 5, 7}}}},
		{func(c *catalog.Catalog) error { return err1(c.UpdateLedger(ctx, catalog.LedgerMetadata{ID: 4})) }, call{"UpdateLedger", []any{catalog.LedgerID(4)}}},
		{func(c *catalog.Catalog) error { return c.DeleteLedgerMetadata(ctx, 4, 2) }, call{"DeleteLedgerMetadata", []any{catalog.LedgerID(4), int64(2)}}},
		{func(c *catalog.Catalog) error { return err1(c.ListLedgersByPartition(ctx, "t1", 3, "tok", 0)) }, call{"ListLedgersByPartition", []any{catalog.TopicID("t1"), 3, "tok", catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return err1(c.ListLedgersByState(ctx, catalog.LedgerClosed, "", 1)) }, call{"ListLedgersByState", []any{catalog.LedgerClosed, "", 1}}},
		{func(c *catalog.Catalog) error { return err1(c.HeartbeatBookie(ctx, bookie, ttl)) }, call{"HeartbeatBookie", []any{"b1", ttl}}},
		{func(c *catalog.Catalog) error { return err1(c.ListLiveBookies(ctx)) }, call{"ListLiveBookies", nil}},
		{func(c *catalog.Catalog) error { return c.RemoveBookie(ctx, "b1") }, call{"RemoveBookie", []any{"b1"}}},
		{func(c *catalog.Catalog) error { return err1(c.CreateTrigger(ctx, "t", trigger)) }, call{"CreateTrigger", []any{"t", trigger}}},
		{func(c *catalog.Catalog) error { return err1(c.GetTrigger(ctx, "t")) }, call{"GetTrigger", []any{"t"}}},
		{func(c *catalog.Catalog) error { return err1(c.ListTriggers(ctx, "tok", 0)) }, call{"ListTriggers", []any{"tok", catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return err1(c.UpdateTrigger(ctx, "t", trigger, 2)) }, call{"UpdateTrigger", []any{"t", trigger, int64(2)}}},
		{func(c *catalog.Catalog) error { return err1(c.DeleteTrigger(ctx, "t")) }, call{"DeleteTrigger", []any{"t"}}},
		{func(c *catalog.Catalog) error { return err1(c.RegisterSchema(ctx, "s", schemaRec, 2)) }, call{"RegisterSchema", []any{"s", `"string"`, 2}}},
		{func(c *catalog.Catalog) error { return err1(c.GetSchema(ctx, 7)) }, call{"GetSchema", []any{int64(7)}}},
		{func(c *catalog.Catalog) error { return err1(c.ListSubjectVersions(ctx, "s", true)) }, call{"ListSubjectVersions", []any{"s", true}}},
		{func(c *catalog.Catalog) error { return err1(c.ListSubjects(ctx, false, "tok", 0)) }, call{"ListSubjects", []any{false, "tok", catalog.DefaultPageSize}}},
		{func(c *catalog.Catalog) error { return err1(c.DeleteSubjectVersion(ctx, "s", 3, true)) }, call{"DeleteSubjectVersion", []any{"s", 3, true}}},
		{func(c *catalog.Catalog) error { return err1(c.GetCompatibility(ctx, "")) }, call{"GetCompatibility", []any{""}}},
		{func(c *catalog.Catalog) error { return c.SetCompatibility(ctx, "s", "FULL") }, call{"SetCompatibility", []any{"s", "FULL"}}},
		{func(c *catalog.Catalog) error { return err1(c.ListACLs(ctx, catalog.ACLFilter{Principal: "User:*"})) }, call{"AllACLs", nil}},
		{func(c *catalog.Catalog) error { return c.Close() }, call{"Close", nil}},
	}
	// CreateACLs and DeleteACLs read the ACLs before they write:
	// TestACLsOverTheDriver covers them.
	reached := map[string]bool{"PutACLs": true, "RemoveACLs": true}
	for _, tc := range cases {
		r := &recorder{}
		if err := tc.call(catalog.New(r)); err != nil {
			t.Errorf("%s: %v", tc.want.method, err)
			continue
		}
		if len(r.calls) != 1 || !reflect.DeepEqual(r.calls[0], tc.want) {
			t.Errorf("driver calls %v, want [%v]", r.calls, tc.want)
		}
		reached[tc.want.method] = true
	}
	for _, m := range methods(reflect.TypeFor[catalog.Driver]()) {
		if !reached[m] {
			t.Errorf("no case reaches Driver.%s", m)
		}
	}
}

// TestDriverErrorsAndResultsPassThrough: what the driver answers is what
// the caller gets, its errors unwrapped.
func TestDriverErrorsAndResultsPassThrough(t *testing.T) {
	ctx := t.Context()
	boom := errors.New("boom")
	r := &recorder{err: boom}
	c := catalog.New(r)
	if _, err := c.GetTopic(ctx, "orders"); err != boom {
		t.Errorf("GetTopic: %v, want the driver's error itself", err)
	}
	if _, err := c.ListPartitions(ctx, "orders", "", 0); err != boom {
		t.Errorf("ListPartitions: %v, want the driver's error itself", err)
	}

	// ListPartitions builds the page from the range: the next token is the
	// index after the last partition, only when more follow.
	ps := []catalog.Partition{{Index: 5}, {Index: 6}}
	for _, more := range []bool{true, false} {
		r := &recorder{partitions: ps, more: more}
		page, err := catalog.New(r).ListPartitions(ctx, "orders", catalog.IndexToken(5), 2)
		want := catalog.Page[catalog.Partition]{Items: ps}
		if more {
			want.NextPageToken = catalog.IndexToken(7)
		}
		if err != nil || !reflect.DeepEqual(page, want) {
			t.Errorf("more=%v: page %+v, %v; want %+v", more, page, err, want)
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

// aclDriver is a recorder that stores ACLs.
type aclDriver struct {
	recorder
	acls map[string]catalog.ACL
}

func (d *aclDriver) PutACLs(_ context.Context, acls []catalog.ACL) error {
	d.calls = append(d.calls, call{"PutACLs", []any{len(acls)}})
	for _, a := range acls {
		d.acls[catalog.ACLKey(a)] = a
	}
	return nil
}

func (d *aclDriver) RemoveACLs(_ context.Context, acls []catalog.ACL) error {
	d.calls = append(d.calls, call{"RemoveACLs", []any{len(acls)}})
	for _, a := range acls {
		delete(d.acls, catalog.ACLKey(a))
	}
	return nil
}

func (d *aclDriver) AllACLs(context.Context) ([]catalog.ACL, error) {
	d.calls = append(d.calls, call{"AllACLs", nil})
	var out []catalog.ACL
	for _, a := range d.acls {
		out = append(out, a)
	}
	return out, nil
}

// CreateACLs puts only the ACLs not stored (none when all are), and keeps
// the bound; DeleteACLs removes what its filter selects and returns it.
func TestACLsOverTheDriver(t *testing.T) {
	ctx := t.Context()
	d := &aclDriver{acls: map[string]catalog.ACL{}}
	c := catalog.New(d)
	deny := goodACL
	deny.Permission = catalog.Deny
	if err := c.CreateACLs(ctx, []catalog.ACL{goodACL, deny, goodACL}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateACLs(ctx, []catalog.ACL{deny}); err != nil {
		t.Fatal(err)
	}
	want := []call{{"AllACLs", nil}, {"PutACLs", []any{2}}, {"AllACLs", nil}}
	if !reflect.DeepEqual(d.calls, want) {
		t.Fatalf("driver calls %v; want %v", d.calls, want)
	}
	gone, err := c.DeleteACLs(ctx, catalog.ACLFilter{Permission: catalog.Deny})
	if err != nil || len(gone) != 1 || gone[0] != deny || len(d.acls) != 1 {
		t.Fatalf("DeleteACLs(deny) = %v, %v; %d left", gone, err, len(d.acls))
	}
	for i := range catalog.MaxACLs - 1 {
		a := goodACL
		a.ResourceName = fmt.Sprintf("t%05d", i)
		d.acls[catalog.ACLKey(a)] = a
	}
	if err := c.CreateACLs(ctx, []catalog.ACL{deny}); !errors.Is(err, catalog.ErrLimitExceeded) {
		t.Fatalf("CreateACLs past MaxACLs: %v; want ErrLimitExceeded", err)
	}
}
