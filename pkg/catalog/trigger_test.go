package catalog_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestTriggerDefaults(t *testing.T) {
	got := catalog.TriggerSpec{Topic: "orders", Function: "f"}.WithDefaults()
	want := catalog.TriggerSpec{Topic: "orders", Function: "f", StartingPosition: catalog.StartLatest,
		BatchSize: 100, MaxBatchBytes: 6 << 20, Parallelization: 1, MaxRetries: 3,
		RetryBackoffInitialMs: 100, RetryBackoffMaxMs: 30_000}
	if got != want {
		t.Fatalf("WithDefaults = %+v, want %+v", got, want)
	}
	if got.WithDefaults() != got {
		t.Fatal("WithDefaults is not idempotent")
	}
	// A large initial backoff raises the defaulted maximum with it.
	if s := (catalog.TriggerSpec{RetryBackoffInitialMs: 60_000}).WithDefaults(); s.RetryBackoffMaxMs != 60_000 {
		t.Fatalf("max backoff = %d, want the initial 60000", s.RetryBackoffMaxMs)
	}
	if r := (catalog.TriggerSpec{MaxRetries: -1}).Retries(); r != 0 {
		t.Fatalf("Retries of -1 = %d, want 0", r)
	}
	if err := catalog.ValidateTrigger("t", catalog.TriggerSpec{Topic: "orders", Function: "f"}); err != nil {
		t.Fatalf("the zero spec with a topic and a function: %v", err)
	}
}

func TestValidateFunction(t *testing.T) {
	for _, ok := range []string{
		"my-function", "my_function:PROD", "my-function:$LATEST", "my-function:7",
		"123456789012:function:my-function",
		"arn:aws:lambda:us-east-1:123456789012:function:my-function",
		"arn:aws:lambda:eu-west-1:123456789012:function:my-function:live",
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f",
	} {
		if err := catalog.ValidateFunction(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "has space", "a/b", "f:", "f:a:b", "arn:aws:s3:::bucket", "arn:aws:lambda:us-east-1:12:function:f",
		strings.Repeat("f", catalog.MaxTriggerFunctionLength+1),
	} {
		var ve *catalog.ValidationError
		if err := catalog.ValidateFunction(bad); !errors.As(err, &ve) || ve.Field != "function" {
			t.Errorf("%q: err = %v, want a ValidationError for function", bad, err)
		}
	}
}

// TestValidateTriggerReportsAll: one bad value per field, all reported in
// one error, each naming its field.
func TestValidateTriggerReportsAll(t *testing.T) {
	spec := catalog.TriggerSpec{
		Topic: "bad topic", Function: "bad function", StartingPosition: "middle",
		BatchSize: catalog.MaxTriggerBatchSize + 1, MaxBatchBytes: catalog.MaxTriggerBatchBytes + 1,
		BatchWindowMs: -1, Parallelization: catalog.MaxTriggerParallelization + 1, MaxRetries: -2,
		RetryBackoffInitialMs: -1, RetryBackoffMaxMs: catalog.MaxTriggerRetryBackoffMs + 1,
		MaxRecordAgeMs: 1, OnFailureTopic: "bad/dlq",
	}
	err := catalog.ValidateTrigger("", spec)
	want := []string{"name", "topic", "function", "starting_position", "batch_size", "max_batch_bytes",
		"batch_window_ms", "parallelization", "max_retries", "retry_backoff_initial_ms", "retry_backoff_max_ms",
		"max_record_age_ms", "on_failure_topic"}
	if got := fields(err); !slices.Equal(got, want) {
		t.Fatalf("fields = %v, want %v\nerr: %v", got, want, err)
	}
	if !errors.Is(err, catalog.ErrInvalid) {
		t.Fatal("not ErrInvalid")
	}
}

func TestValidateTriggerRules(t *testing.T) {
	ok := catalog.TriggerSpec{Topic: "orders", Function: "f"}
	cases := []struct {
		name  string
		edit  func(*catalog.TriggerSpec)
		field string // "" = valid
	}{
		{"timestamp without time", func(s *catalog.TriggerSpec) { s.StartingPosition = catalog.StartTimestamp }, "starting_timestamp_ms"},
		{"timestamp with time", func(s *catalog.TriggerSpec) {
			s.StartingPosition, s.StartingTimestampMs = catalog.StartTimestamp, 1_700_000_000_000
		}, ""},
		{"time without timestamp", func(s *catalog.TriggerSpec) { s.StartingTimestampMs = 5 }, "starting_timestamp_ms"},
		{"backoff max below initial", func(s *catalog.TriggerSpec) { s.RetryBackoffInitialMs, s.RetryBackoffMaxMs = 500, 400 }, "retry_backoff_max_ms"},
		{"DLQ is the topic", func(s *catalog.TriggerSpec) { s.OnFailureTopic = "orders" }, "on_failure_topic"},
		{"DLQ", func(s *catalog.TriggerSpec) { s.OnFailureTopic = "orders-dlq" }, ""},
		{"no retries", func(s *catalog.TriggerSpec) { s.MaxRetries = -1 }, ""},
		{"largest", func(s *catalog.TriggerSpec) {
			s.BatchSize, s.MaxBatchBytes, s.BatchWindowMs = catalog.MaxTriggerBatchSize, catalog.MaxTriggerBatchBytes, catalog.MaxTriggerBatchWindowMs
			s.Parallelization, s.MaxRetries = catalog.MaxTriggerParallelization, catalog.MaxTriggerRetries
			s.RetryBackoffInitialMs, s.RetryBackoffMaxMs = catalog.MaxTriggerRetryBackoffMs, catalog.MaxTriggerRetryBackoffMs
			s.MaxRecordAgeMs = catalog.MaxTriggerRecordAgeMs
		}, ""},
		{"age too old", func(s *catalog.TriggerSpec) { s.MaxRecordAgeMs = catalog.MaxTriggerRecordAgeMs + 1 }, "max_record_age_ms"},
		{"negative batch", func(s *catalog.TriggerSpec) { s.BatchSize = -1 }, "batch_size"},
	}
	for _, c := range cases {
		s := ok
		c.edit(&s)
		err := catalog.ValidateTrigger("t", s)
		if got := fields(err); (c.field == "" && err != nil) || (c.field != "" && !slices.Equal(got, []string{c.field})) {
			t.Errorf("%s: err = %v, want field %q", c.name, err, c.field)
		}
	}
}

func TestCheckTriggerUpdate(t *testing.T) {
	old := catalog.Trigger{Name: "t", TriggerSpec: catalog.TriggerSpec{Topic: "orders", Function: "f"}}
	if err := catalog.CheckTriggerUpdate(old, catalog.TriggerSpec{Topic: "orders", Function: "g"}); err != nil {
		t.Fatal(err)
	}
	if got := fields(catalog.CheckTriggerUpdate(old, catalog.TriggerSpec{Topic: "other", Function: "f"})); !slices.Equal(got, []string{"topic"}) {
		t.Fatalf("changed topic: fields %v", got)
	}
}

// fields lists the fields of the validation errors joined in err, in order.
func fields(err error) []string {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []string
	for _, e := range errs {
		var ve *catalog.ValidationError
		if errors.As(e, &ve) {
			out = append(out, ve.Field)
		} else {
			out = append(out, "?"+e.Error())
		}
	}
	return out
}

// FuzzValidateTrigger: validation never panics, names only known fields,
// and a valid spec stays valid, unchanged, once its defaults are resolved.
func FuzzValidateTrigger(f *testing.F) {
	f.Add("t", "orders", "fn", "latest", int64(0), 100, 1<<20, int64(0), 1, 3, int64(100), int64(30_000), int64(0), "dlq")
	f.Add("", "", "arn:aws:lambda:us-east-1:123456789012:function:f:1", "timestamp", int64(-1), -1, -1, int64(-1), -1, -2, int64(-1), int64(-1), int64(-1), "")
	known := map[string]bool{"name": true, "topic": true, "function": true, "starting_position": true, "starting_timestamp_ms": true,
		"batch_size": true, "max_batch_bytes": true, "batch_window_ms": true, "parallelization": true, "max_retries": true,
		"retry_backoff_initial_ms": true, "retry_backoff_max_ms": true, "max_record_age_ms": true, "on_failure_topic": true}
	f.Fuzz(func(t *testing.T, name, topic, fn, start string, startTs int64, batch, bytes int, window int64, par, retries int,
		b0, bMax, age int64, dlq string) {
		s := catalog.TriggerSpec{Topic: topic, Function: fn, StartingPosition: catalog.StartingPosition(start), StartingTimestampMs: startTs,
			BatchSize: batch, MaxBatchBytes: bytes, BatchWindowMs: window, Parallelization: par, MaxRetries: retries,
			RetryBackoffInitialMs: b0, RetryBackoffMaxMs: bMax, MaxRecordAgeMs: age, OnFailureTopic: dlq}
		err := catalog.ValidateTrigger(name, s)
		for _, f := range fields(err) {
			if !known[f] {
				t.Fatalf("unknown field %q in %v", f, err)
			}
		}
		if err != nil {
			return
		}
		d := s.WithDefaults()
		if d.WithDefaults() != d || catalog.ValidateTrigger(name, d) != nil {
			t.Fatalf("valid %+v resolves to %+v, which is not stable or not valid", s, d)
		}
		if d.Retries() < 0 || d.Retries() > catalog.MaxTriggerRetries {
			t.Fatalf("Retries() = %d", d.Retries())
		}
	})
}
