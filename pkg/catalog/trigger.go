package catalog

import (
	"context"
	"regexp"
	"time"
)

// A trigger binds a topic to a function (docs/DESIGN.md §2.10): the fetch
// service reads the topic as a consumer group of its own and invokes the
// function (AWS Lambda's Invoke API) with batches of records
// (services/fetch/triggers.go).
//
// The settable fields mirror Lambda's event source mappings for Kafka and
// Kinesis, with their names and, where Lambda has one, its bound.

// StartingPosition is where a trigger starts reading a partition it has no
// committed offset for.
type StartingPosition string

const (
	// StartLatest: only records produced after the trigger first reads the
	// partition (Kafka's auto.offset.reset=latest). The default.
	StartLatest StartingPosition = "latest"
	// StartEarliest: the oldest record still stored.
	StartEarliest StartingPosition = "earliest"
	// StartTimestamp: the first record at or after StartingTimestampMs.
	StartTimestamp StartingPosition = "timestamp"
)

// StartingPositions lists the valid positions, for messages and flags.
var StartingPositions = []StartingPosition{StartEarliest, StartLatest, StartTimestamp}

// Trigger defaults: a zero field of a TriggerSpec means the default below
// (WithDefaults), and the stored record holds the value it resolved to, so
// a later change of a default does not change existing triggers.
const (
	DefaultTriggerBatchSize           = 100 // Lambda's default for Kafka and Kinesis
	DefaultTriggerMaxBatchBytes       = MaxTriggerBatchBytes
	DefaultTriggerParallelization     = 1
	DefaultTriggerMaxRetries          = 3
	DefaultTriggerRetryBackoffInitial = 100    // ms
	DefaultTriggerRetryBackoffMax     = 30_000 // ms
)

// TriggerSpec is what a trigger's creator chooses. The zero value of every
// numeric field and of StartingPosition means its default; the zero value of
// Enabled, BatchWindowMs, MaxRecordAgeMs, BisectOnError and OnFailureTopic
// is a real choice (disabled, no window, no age limit, no bisection, no
// DLQ).
type TriggerSpec struct {
	// Topic is the topic read. It must exist at create (ErrNotFound
	// otherwise) and cannot change afterwards: a trigger reading another
	// topic is a new trigger (its offsets would mean nothing there).
	Topic string
	// Function is the Lambda function invoked: a name, a partial ARN
	// (account:function:name) or a full ARN, optionally with a version or
	// alias qualifier — Lambda's Invoke FunctionName.
	Function string
	// Enabled: a disabled trigger is stored but not run.
	Enabled bool
	// StartingPosition: "" means StartLatest.
	StartingPosition StartingPosition
	// StartingTimestampMs (ms since the Unix epoch) is required with
	// StartTimestamp and must be 0 otherwise.
	StartingTimestampMs int64
	// BatchSize is the most records per invocation: 0 means
	// DefaultTriggerBatchSize; at most MaxTriggerBatchSize.
	BatchSize int
	// MaxBatchBytes bounds an invocation's payload (the JSON event, base64
	// keys and values included): 0 means DefaultTriggerMaxBatchBytes; at most
	// MaxTriggerBatchBytes, Lambda's synchronous invoke payload limit.
	MaxBatchBytes int
	// BatchWindowMs is how long a partial batch waits for more records:
	// 0 means none (invoke as soon as records are there); at most
	// MaxTriggerBatchWindowMs.
	BatchWindowMs int64
	// Parallelization is the batches of one partition in flight at once:
	// 1 keeps strict partition order; above 1, batches run concurrently but
	// records of one key are never in two concurrent batches, so key order
	// holds. 0 means 1; at most MaxTriggerParallelization.
	Parallelization int
	// MaxRetries is how often a failed batch is retried before it goes to
	// OnFailureTopic (or the partition stops): 0 means
	// DefaultTriggerMaxRetries, -1 means no retries, at most
	// MaxTriggerRetries. Throttling does not count.
	MaxRetries int
	// RetryBackoffInitialMs and RetryBackoffMaxMs bound the exponential,
	// jittered backoff between retries: 0 means
	// DefaultTriggerRetryBackoffInitial / DefaultTriggerRetryBackoffMax;
	// initial <= max <= MaxTriggerRetryBackoffMs.
	RetryBackoffInitialMs int64
	RetryBackoffMaxMs     int64
	// MaxRecordAgeMs: records older than this are not invoked but sent to
	// OnFailureTopic (or stop the partition). 0 means no limit; otherwise
	// within [MinTriggerRecordAgeMs, MaxTriggerRecordAgeMs].
	MaxRecordAgeMs int64
	// BisectOnError splits a failing batch in two and retries each half,
	// to isolate a poison record.
	BisectOnError bool
	// OnFailureTopic, if set, receives the records that ran out of retries
	// or age (the DLQ); it must differ from Topic. Without it, such a
	// record stops the trigger on its partition (never skipped silently).
	// Its existence is not checked here: the runtime reports a missing one.
	OnFailureTopic string
	// ReadUncommitted invokes the function with the records of open and
	// aborted transactions too (Kafka's read_uncommitted). The zero value
	// is read_committed: only committed transactions' records (and
	// non-transactional ones), each once its transaction committed.
	ReadUncommitted bool
	// RunAs is the principal ("User:alice") that created or last updated
	// the trigger, set by the admin service from the caller (never by the
	// caller): with authorization on, the runtime invokes only while it
	// may still consume Topic (and produce to OnFailureTopic). Empty when
	// authentication was off.
	RunAs string
}

// Trigger is a stored trigger.
type Trigger struct {
	Name string
	TriggerSpec
	// TopicID is the incarnation of Topic the trigger was created on: if the
	// topic is deleted and created again, the runtime can tell.
	TopicID   TopicID
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version increases by one with every change; pass it back as
	// expectVersion to change the trigger with compare-and-set.
	Version int64
}

// Triggers manages triggers.
type Triggers interface {
	// CreateTrigger stores a trigger with spec's defaults resolved, at
	// Version 1. Errors: *ValidationError (every bad field at once),
	// ErrNotFound (spec.Topic is not a live topic), ErrAlreadyExists.
	CreateTrigger(ctx context.Context, name string, spec TriggerSpec) (Trigger, error)

	// GetTrigger returns a trigger. Errors: *ValidationError (name),
	// ErrNotFound.
	GetTrigger(ctx context.Context, name string) (Trigger, error)

	// ListTriggers returns triggers in name order. limit 0 means
	// DefaultPageSize. Errors: *ValidationError (limit, pageToken).
	ListTriggers(ctx context.Context, pageToken string, limit int) (Page[Trigger], error)

	// UpdateTrigger replaces the trigger's spec (defaults resolved) if its
	// version is still expectVersion. Errors: *ValidationError (also for a
	// changed Topic), ErrNotFound, ErrVersionConflict.
	UpdateTrigger(ctx context.Context, name string, spec TriggerSpec, expectVersion int64) (Trigger, error)

	// DeleteTrigger removes a trigger and returns the removed record.
	// Errors: *ValidationError (name), ErrNotFound.
	DeleteTrigger(ctx context.Context, name string) (Trigger, error)
}

// WithDefaults returns s with every zero field that has a default set to it.
func (s TriggerSpec) WithDefaults() TriggerSpec {
	if s.StartingPosition == "" {
		s.StartingPosition = StartLatest
	}
	if s.BatchSize == 0 {
		s.BatchSize = DefaultTriggerBatchSize
	}
	if s.MaxBatchBytes == 0 {
		s.MaxBatchBytes = DefaultTriggerMaxBatchBytes
	}
	if s.Parallelization == 0 {
		s.Parallelization = DefaultTriggerParallelization
	}
	if s.MaxRetries == 0 {
		s.MaxRetries = DefaultTriggerMaxRetries
	}
	if s.RetryBackoffInitialMs == 0 {
		s.RetryBackoffInitialMs = DefaultTriggerRetryBackoffInitial
	}
	if s.RetryBackoffMaxMs == 0 {
		s.RetryBackoffMaxMs = max(DefaultTriggerRetryBackoffMax, s.RetryBackoffInitialMs)
	}
	return s
}

// Retries is the number of retries MaxRetries stands for (-1: none).
func (s TriggerSpec) Retries() int {
	if s.MaxRetries < 0 {
		return 0
	}
	return s.WithDefaults().MaxRetries
}

// ValidateTriggerName checks a trigger name: 1..MaxTriggerNameLength bytes
// of [a-zA-Z0-9._-], not "." or "..".
func ValidateTriggerName(name string) error {
	switch {
	case name == "":
		return Invalid("name", "trigger name is empty")
	case len(name) > MaxTriggerNameLength:
		return Invalid("name", "trigger name is %d characters, more than %d", len(name), MaxTriggerNameLength)
	case name == "." || name == "..":
		return Invalid("name", "trigger name cannot be %q", name)
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return Invalid("name", "trigger name %q has %q at byte %d; allowed are [a-zA-Z0-9._-]", name, name[i], i)
		}
	}
	return nil
}

// lambdaFunction is Lambda's pattern for Invoke's FunctionName: a name,
// partial ARN or full ARN, with an optional version or alias.
var lambdaFunction = regexp.MustCompile(`^(arn:(aws[a-zA-Z-]*)?:lambda:)?([a-z]{2}(-gov)?-[a-z]+-\d{1}:)?(\d{12}:)?(function:)?([a-zA-Z0-9-_]+)(:(\$LATEST|[a-zA-Z0-9-_]+))?$`)

// ValidateFunction checks a Lambda function name or ARN.
func ValidateFunction(fn string) error {
	switch {
	case fn == "":
		return Invalid("function", "is empty; want a Lambda function name or ARN")
	case len(fn) > MaxTriggerFunctionLength:
		return Invalid("function", "is %d bytes, more than %d", len(fn), MaxTriggerFunctionLength)
	case !lambdaFunction.MatchString(fn):
		return Invalid("function", "%q is not a Lambda function name (letters, digits, - and _) or ARN (arn:aws:lambda:REGION:ACCOUNT:function:NAME), optionally with :VERSION or :ALIAS", fn)
	}
	return nil
}

// ValidateTrigger checks a trigger's name and spec (defaults resolved
// first), reporting every violation; fields are named as in the API
// (snake_case).
func ValidateTrigger(name string, spec TriggerSpec) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(ValidateTriggerName(name))
	errs = append(errs, spec.violations()...)
	return joinErrs(errs)
}

func (spec TriggerSpec) violations() []error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	s := spec.WithDefaults()
	if err := ValidateTopicName(s.Topic); err != nil {
		add(Invalid("topic", "%s", err.(*ValidationError).Reason))
	}
	add(ValidateFunction(s.Function))
	switch s.StartingPosition {
	case StartEarliest, StartLatest:
		if s.StartingTimestampMs != 0 {
			add(Invalid("starting_timestamp_ms", "is %d; it is only for starting_position %s", s.StartingTimestampMs, StartTimestamp))
		}
	case StartTimestamp:
		if s.StartingTimestampMs <= 0 {
			add(Invalid("starting_timestamp_ms", "is %d; starting_position %s needs a time in ms since the Unix epoch", s.StartingTimestampMs, StartTimestamp))
		}
	default:
		add(Invalid("starting_position", "%q: want %s, %s or %s", s.StartingPosition, StartEarliest, StartLatest, StartTimestamp))
	}
	add(intIn("batch_size", s.BatchSize, 1, MaxTriggerBatchSize))
	add(intIn("max_batch_bytes", s.MaxBatchBytes, 1, MaxTriggerBatchBytes))
	add(int64In("batch_window_ms", s.BatchWindowMs, 0, MaxTriggerBatchWindowMs))
	add(intIn("parallelization", s.Parallelization, 1, MaxTriggerParallelization))
	if s.MaxRetries != -1 && (s.MaxRetries < 1 || s.MaxRetries > MaxTriggerRetries) {
		add(Invalid("max_retries", "%d: want -1 (no retries) or 1..%d (0 means %d)", s.MaxRetries, MaxTriggerRetries, DefaultTriggerMaxRetries))
	}
	add(int64In("retry_backoff_initial_ms", s.RetryBackoffInitialMs, 1, MaxTriggerRetryBackoffMs))
	add(int64In("retry_backoff_max_ms", s.RetryBackoffMaxMs, 1, MaxTriggerRetryBackoffMs))
	if s.RetryBackoffMaxMs < s.RetryBackoffInitialMs && s.RetryBackoffMaxMs >= 1 {
		add(Invalid("retry_backoff_max_ms", "%d is below retry_backoff_initial_ms %d", s.RetryBackoffMaxMs, s.RetryBackoffInitialMs))
	}
	if s.MaxRecordAgeMs != 0 {
		add(int64In("max_record_age_ms", s.MaxRecordAgeMs, MinTriggerRecordAgeMs, MaxTriggerRecordAgeMs))
	}
	if s.RunAs != "" {
		if err := ValidatePrincipal("run_as", s.RunAs, false); err != nil {
			add(err)
		}
	}
	if s.OnFailureTopic != "" {
		if err := ValidateTopicName(s.OnFailureTopic); err != nil {
			add(Invalid("on_failure_topic", "%s", err.(*ValidationError).Reason))
		} else if s.OnFailureTopic == s.Topic {
			add(Invalid("on_failure_topic", "is the trigger's own topic %q: failed records would come back to the trigger", s.Topic))
		}
	}
	return errs
}

func intIn(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return Invalid(field, "%d is outside [%d, %d]", v, lo, hi)
	}
	return nil
}

func int64In(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return Invalid(field, "%d is outside [%d, %d]", v, lo, hi)
	}
	return nil
}

// CheckTriggerUpdate validates UpdateTrigger against the stored trigger:
// the topic cannot change.
func CheckTriggerUpdate(old Trigger, spec TriggerSpec) error {
	if spec.Topic != old.Topic {
		return Invalid("topic", "cannot change from %q to %q (create a new trigger for another topic)", old.Topic, spec.Topic)
	}
	return nil
}
