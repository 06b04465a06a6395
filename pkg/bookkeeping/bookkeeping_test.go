package bookkeeping_test

import (
	"errors"
	"fmt"
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
