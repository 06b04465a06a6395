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
	c := bookkeeping.Commit{Group: "g", Topic: "t", Member: "m"}
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
}
