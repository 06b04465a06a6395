package catalog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestValidateTopicName(t *testing.T) {
	for _, ok := range []string{"a", "orders", "Orders.v1", "a_b-c.d", "...", strings.Repeat("x", 249)} {
		if err := catalog.ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a b", "a/b", "a#b", "ä", "a\x00", strings.Repeat("x", 250)} {
		err := catalog.ValidateTopicName(bad)
		var ve *catalog.ValidationError
		if !errors.As(err, &ve) || ve.Field != "name" || !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%q: err = %v, want a ValidationError for name", bad, err)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"ingest-0", "10.0.0.1:7420", "pod@host", "0123456789abcdef"} {
		if err := catalog.ValidateID("id", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a/b", "a#b", strings.Repeat("x", catalog.MaxIDLength+1)} {
		if err := catalog.ValidateID("id", bad); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%q: err = %v, want invalid", bad, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for in, want := range map[int]int{0: catalog.DefaultPageSize, 1: 1, catalog.MaxPageSize: catalog.MaxPageSize} {
		if got, err := catalog.PageLimit(in); err != nil || got != want {
			t.Errorf("PageLimit(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []int{-1, catalog.MaxPageSize + 1} {
		if _, err := catalog.PageLimit(bad); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("PageLimit(%d): err = %v, want invalid", bad, err)
		}
	}
}

func TestIndexToken(t *testing.T) {
	for _, i := range []int{1, 42, catalog.MaxPartitions - 1} {
		if got, err := catalog.ParseIndexToken(catalog.IndexToken(i)); err != nil || got != i {
			t.Errorf("round trip of %d = %d, %v", i, got, err)
		}
	}
	for _, bad := range []string{"0", "-1", "01", "+1", "x", "10000", " 1"} {
		if _, err := catalog.ParseIndexToken(bad); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("ParseIndexToken(%q): err = %v, want invalid", bad, err)
		}
	}
}

func TestValidateTTL(t *testing.T) {
	for _, ok := range []time.Duration{catalog.MinHeartbeatTTL, time.Second, catalog.MaxHeartbeatTTL} {
		if err := catalog.ValidateTTL(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []time.Duration{0, -time.Second, catalog.MinHeartbeatTTL - 1, catalog.MaxHeartbeatTTL + 1} {
		if err := catalog.ValidateTTL(bad); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%v: err = %v, want invalid", bad, err)
		}
	}
}
