package record

import (
	"errors"
	"strings"
	"testing"
)

// Limit errors say which Limits field was broken, with the size found and
// the limit, from the Builder and from Validate alike.
func TestFormatErrorNamesTheLimit(t *testing.T) {
	lim := Limits{MaxBatchBytes: 4096, MaxValueBytes: 100, MaxKeyBytes: 10, MaxHeaders: 2, MaxHeaderKeyBytes: 5, MaxHeaderValueBytes: 7}
	for _, tc := range []struct {
		r        Record
		limit    string
		got, max int
	}{
		{Record{Key: []byte(strings.Repeat("k", 11))}, "MaxKeyBytes", 11, 10},
		{Record{Value: make([]byte, 101)}, "MaxValueBytes", 101, 100},
		{Record{Headers: make([]Header, 3)}, "MaxHeaders", 3, 2},
		{Record{Headers: []Header{{Key: "123456"}}}, "MaxHeaderKeyBytes", 6, 5},
		{Record{Headers: []Header{{Key: "h", Value: make([]byte, 8)}}}, "MaxHeaderValueBytes", 8, 7},
	} {
		b, err := NewBuilder(BuilderOptions{Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		err = b.Append(&tc.r)
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrLimit) || fe.Limit != tc.limit || fe.Got != tc.got || fe.Max != tc.max {
			t.Errorf("Append: %v (%+v); want %s %d > %d", err, fe, tc.limit, tc.got, tc.max)
		}
		// The same record in a batch built under wider limits fails
		// Validate with the same report.
		wide, _ := NewBuilder(BuilderOptions{})
		if err := wide.Append(&tc.r); err != nil {
			t.Fatal(err)
		}
		batch, err := wide.Build()
		if err != nil {
			t.Fatal(err)
		}
		err = Validate(batch, lim)
		if !errors.As(err, &fe) || fe.Limit != tc.limit || fe.Got != tc.got || fe.Max != tc.max {
			t.Errorf("Validate: %v (%+v); want %s %d > %d", err, fe, tc.limit, tc.got, tc.max)
		}
	}

	// A record too large for any batch, and a batch too large.
	b, _ := NewBuilder(BuilderOptions{Limits: Limits{MaxBatchBytes: 1024}})
	r := &Record{Value: make([]byte, 1000)}
	var fe *FormatError
	if err := b.Append(r); !errors.As(err, &fe) || fe.Limit != "MaxBatchBytes" || fe.Got != BatchSize(r) || fe.Max != 1024 {
		t.Errorf("Append of a record over MaxBatchBytes: %v (%+v); want MaxBatchBytes %d > 1024", err, fe, BatchSize(r))
	}
	wide, _ := NewBuilder(BuilderOptions{})
	_ = wide.Append(r)
	batch, _ := wide.Build()
	if len(batch) != BatchSize(r) {
		t.Errorf("BatchSize = %d, the built batch is %d bytes", BatchSize(r), len(batch))
	}
	if err := Validate(batch, Limits{MaxBatchBytes: 1024}); !errors.As(err, &fe) || fe.Limit != "MaxBatchBytes" || fe.Got != len(batch) || fe.Max != 1024 {
		t.Errorf("Validate of a batch over MaxBatchBytes: %v (%+v)", err, fe)
	}
}
