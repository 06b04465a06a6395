package bookkeeping_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

func TestTypedErrors(t *testing.T) {
	in := []int32{9, 2, 5}
	fe := bookkeeping.NewFencedError("g", "t", in)
	if !errors.Is(fe, bookkeeping.ErrFenced) || errors.Is(fe, bookkeeping.ErrConflict) {
		t.Fatal("FencedError must be ErrFenced and only that")
	}
	if fmt.Sprint(fe.Partitions) != "[2 5 9]" || fmt.Sprint(in) != "[9 2 5]" {
		t.Fatalf("FencedError partitions %v (input now %v), want sorted copy", fe.Partitions, in)
	}
	wrapped := fmt.Errorf("commit: %w", bookkeeping.NewOffsetRegressionError("g", "t", []int32{3, 1}))
	var re *bookkeeping.OffsetRegressionError
	if !errors.Is(wrapped, bookkeeping.ErrConflict) || !errors.As(wrapped, &re) || fmt.Sprint(re.Partitions) != "[1 3]" {
		t.Fatalf("wrapped OffsetRegressionError: %v", wrapped)
	}
	if !strings.Contains(fe.Error(), `"g"`) || !strings.Contains(fe.Error(), "[2 5 9]") {
		t.Fatalf("FencedError message %q lacks group or partitions", fe.Error())
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "orders.v1", "group/with/slashes", "ünïcödé", strings.Repeat("x", bookkeeping.MaxNameBytes)} {
		if err := bookkeeping.ValidateName("n", ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", bookkeeping.MaxNameBytes+1), "a\x00b", "tab\there", "\xc3", "del\x7f", "c1\u0085"} {
		var ve *bookkeeping.ValidationError
		if err := bookkeeping.ValidateName("n", bad); !errors.As(err, &ve) || ve.Field != "n" {
			t.Errorf("ValidateName(%q) = %v, want a *ValidationError for n", bad, err)
		}
	}
}

func TestCommitValidateAcceptsTheLimits(t *testing.T) {
	c := bookkeeping.Commit{Group: "g", Topic: "t", TopicID: strings.Repeat("i", bookkeeping.MaxNameBytes), Member: "m"}
	for p := range int32(bookkeeping.MaxCommitPartitions) {
		c.Offsets = append(c.Offsets, bookkeeping.PartitionOffset{
			Partition: p * 64, Offset: bookkeeping.MaxOffset, Epoch: 1, Metadata: strings.Repeat("x", bookkeeping.MaxMetadataBytes),
		})
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a commit at every limit: %v", err)
	}
	if err := c.ValidateReset(); err == nil {
		t.Fatal("ValidateReset accepted a commit with a member")
	}
	c.Member = ""
	for i := range c.Offsets {
		c.Offsets[i].Epoch = 0
	}
	if err := c.ValidateReset(); err != nil {
		t.Fatalf("a reset at every limit: %v", err)
	}
}

func TestMemberValidate(t *testing.T) {
	m := bookkeeping.Member{ID: "m", SessionTimeout: bookkeeping.MinSessionTimeout}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m.SessionTimeout = bookkeeping.MaxSessionTimeout + time.Nanosecond
	if err := m.Validate(); err == nil {
		t.Fatal("Validate accepted a session timeout above the maximum")
	}
	m.SessionTimeout = bookkeeping.MaxSessionTimeout
	m.LastHeartbeat = time.Unix(-1, 0) // set by stores, never checked
	for i := range bookkeeping.MaxMemberTopics {
		m.Topics = append(m.Topics, fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i))
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("a member at every limit: %v", err)
	}
}

func TestValidateTopics(t *testing.T) {
	for _, ok := range [][]string{nil, {}, {"a"}, {"b", "a", "ü"}} {
		if err := bookkeeping.ValidateTopics("f", ok); err != nil {
			t.Errorf("ValidateTopics(%q): %v", ok, err)
		}
	}
	tooMany := make([]string, bookkeeping.MaxMemberTopics+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint(i)
	}
	for _, bad := range [][]string{tooMany, {""}, {"a", "a"}, {"a", "b\x00"}, {strings.Repeat("x", bookkeeping.MaxNameBytes+1)}, {"\xff"}} {
		var ve *bookkeeping.ValidationError
		if err := bookkeeping.ValidateTopics("f", bad); !errors.As(err, &ve) || ve.Field != "f" {
			t.Errorf("ValidateTopics(%q) = %v, want a *ValidationError for f", bad, err)
		}
	}
}

func TestValidateListGroups(t *testing.T) {
	if err := bookkeeping.ValidateListGroups("", 1); err != nil {
		t.Fatal(err)
	}
	if err := bookkeeping.ValidateListGroups("g", bookkeeping.MaxListLimit); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after string
		limit int
		field string
	}{{"", 0, "limit"}, {"g", bookkeeping.MaxListLimit + 1, "limit"}, {"g\x00", 1, "after"}, {strings.Repeat("g", bookkeeping.MaxNameBytes+1), 1, "after"}} {
		var ve *bookkeeping.ValidationError
		if err := bookkeeping.ValidateListGroups(c.after, c.limit); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("ValidateListGroups(%q, %d) = %v, want a *ValidationError for %s", c.after, c.limit, err, c.field)
		}
	}
}

// validTxn is a Txn that passes Validate; the cases change one field.
func validTxn() bookkeeping.Txn {
	return bookkeeping.Txn{
		TransactionalID: "tx", ProducerID: 1, Epoch: 0, Status: bookkeeping.TxnOngoing,
		Timeout: time.Minute, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Partitions: []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 0}}, Groups: []string{"g"},
	}
}

func TestTxnValidateAcceptsTheLimits(t *testing.T) {
	tx := validTxn()
	tx.TransactionalID = strings.Repeat("x", bookkeeping.MaxNameBytes)
	tx.ProducerID, tx.Epoch, tx.Version = math.MaxInt64, bookkeeping.MaxProducerEpoch, math.MaxInt64-1
	tx.Timeout = bookkeeping.MaxTxnTimeout
	tx.Deadline = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	tx.Partitions, tx.Groups = nil, nil
	for i := range bookkeeping.MaxTxnPartitions {
		tx.Partitions = append(tx.Partitions, bookkeeping.TxnPartition{
			TopicID: fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i%7), Partition: int32(i / 7)})
	}
	for i := range bookkeeping.MaxTxnGroups {
		tx.Groups = append(tx.Groups, fmt.Sprintf("%0*d", bookkeeping.MaxNameBytes, i))
	}
	if err := tx.Validate(); err != nil {
		t.Fatalf("a txn at every limit: %v", err)
	}
	for _, s := range []bookkeeping.TxnStatus{bookkeeping.TxnEmpty, bookkeeping.TxnCompleteAbort} {
		tx := validTxn()
		tx.Status, tx.Deadline, tx.Timeout = s, time.Time{}, 0
		if err := tx.Validate(); err != nil {
			t.Errorf("status %v without deadline or timeout: %v", s, err)
		}
	}
}

func TestTxnValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		field string
		edit  func(*bookkeeping.Txn)
	}{
		{"txn.transactional_id", func(x *bookkeeping.Txn) { x.TransactionalID = "" }},
		{"txn.transactional_id", func(x *bookkeeping.Txn) { x.TransactionalID = "a\x00b" }},
		{"txn.producer_id", func(x *bookkeeping.Txn) { x.ProducerID = 0 }},
		{"txn.epoch", func(x *bookkeeping.Txn) { x.Epoch = -1 }},
		{"txn.status", func(x *bookkeeping.Txn) { x.Status = 0 }},
		{"txn.status", func(x *bookkeeping.Txn) { x.Status = bookkeeping.TxnCompleteAbort + 1 }},
		{"txn.timeout", func(x *bookkeeping.Txn) { x.Timeout = -time.Nanosecond }},
		{"txn.timeout", func(x *bookkeeping.Txn) { x.Timeout = bookkeeping.MaxTxnTimeout + time.Millisecond }},
		{"txn.prev_producer_id", func(x *bookkeeping.Txn) { x.PrevProducerID = -1 }},
		{"txn.deadline", func(x *bookkeeping.Txn) { x.Deadline = time.Unix(0, 0) }},
		{"txn.deadline", func(x *bookkeeping.Txn) { x.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"txn.partitions", func(x *bookkeeping.Txn) {
			x.Partitions = make([]bookkeeping.TxnPartition, bookkeeping.MaxTxnPartitions+1)
		}},
		{"txn.partitions[1].topic_id", func(x *bookkeeping.Txn) {
			x.Partitions = append(x.Partitions, bookkeeping.TxnPartition{TopicID: "", Partition: 1})
		}},
		{"txn.partitions[1].partition", func(x *bookkeeping.Txn) {
			x.Partitions = append(x.Partitions, bookkeeping.TxnPartition{TopicID: "t1", Partition: -1})
		}},
		{"txn.partitions[1]", func(x *bookkeeping.Txn) { x.Partitions = append(x.Partitions, x.Partitions[0]) }},
		{"txn.groups", func(x *bookkeeping.Txn) { x.Groups = make([]string, bookkeeping.MaxTxnGroups+1) }},
		{"txn.groups[1]", func(x *bookkeeping.Txn) { x.Groups = append(x.Groups, strings.Repeat("g", bookkeeping.MaxNameBytes+1)) }},
		{"txn.groups[1]", func(x *bookkeeping.Txn) { x.Groups = append(x.Groups, "g") }},
		{"txn.version", func(x *bookkeeping.Txn) { x.Version = -1 }},
		{"txn.version", func(x *bookkeeping.Txn) { x.Version = math.MaxInt64 }},
	} {
		tx := validTxn()
		c.edit(&tx)
		var ve *bookkeeping.ValidationError
		if err := tx.Validate(); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("Validate of %+v = %v, want a *ValidationError for %s", tx, err, c.field)
		}
	}
}

// TestTxnStored: what every backend keeps of a Txn — milliseconds, UTC,
// nil for empty lists — and a copy of the lists, not the caller's.
func TestTxnStored(t *testing.T) {
	tx := validTxn()
	tx.Timeout = 1500*time.Millisecond + 999*time.Microsecond
	tx.Deadline = time.Date(2026, 1, 2, 3, 4, 5, 678_999_999, time.FixedZone("X", 3600))
	s := tx.Stored()
	if s.Timeout != 1500*time.Millisecond {
		t.Errorf("stored timeout %v, want 1.5s", s.Timeout)
	}
	if want := time.Date(2026, 1, 2, 2, 4, 5, 678_000_000, time.UTC); s.Deadline != want {
		t.Errorf("stored deadline %v, want %v", s.Deadline, want)
	}
	s.Partitions[0].Partition, s.Groups[0] = 9, "other"
	if tx.Partitions[0].Partition != 0 || tx.Groups[0] != "g" {
		t.Error("Stored shares its lists with the Txn it was made from")
	}
	tx.Deadline, tx.Partitions, tx.Groups = time.Time{}, []bookkeeping.TxnPartition{}, []string{}
	if s := tx.Stored(); !s.Deadline.IsZero() || s.Partitions != nil || s.Groups != nil {
		t.Errorf("Stored of an empty deadline and lists = %+v, want zero and nil", s)
	}
}

func TestValidateListTxns(t *testing.T) {
	for _, ok := range []struct {
		after string
		limit int
	}{{"", 1}, {"tx", bookkeeping.MaxTxnListLimit}} {
		if err := bookkeeping.ValidateListTxns(ok.after, ok.limit); err != nil {
			t.Errorf("ValidateListTxns(%q, %d): %v", ok.after, ok.limit, err)
		}
	}
	for _, c := range []struct {
		after string
		limit int
		field string
	}{{"", 0, "limit"}, {"", bookkeeping.MaxTxnListLimit + 1, "limit"}, {"a\x00", 1, "after"}} {
		var ve *bookkeeping.ValidationError
		if err := bookkeeping.ValidateListTxns(c.after, c.limit); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("ValidateListTxns(%q, %d) = %v, want a *ValidationError for %s", c.after, c.limit, err, c.field)
		}
	}
}
