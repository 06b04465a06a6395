package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// `sluice trigger`: triggers bind a topic to a Lambda function; the fetch
// service runs them (docs/DESIGN.md §2.10).

func newTriggerCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "trigger",
		Short: "create, update, describe, list or delete function triggers",
		Long: `Creates, updates, describes, lists or deletes triggers — a topic bound to an AWS Lambda
function — through the admin API of a Sluice (sluice dev, or an ingest or fetch copy).
Every fetch copy runs the enabled triggers: it reads the topic as the trigger's own
consumer group (__trigger.NAME) and invokes the function with Lambda's Kafka event;
describe shows where each partition stands and its last error.`,
	})
	cmd.AddCommand(newTriggerCreateCmd(), newTriggerUpdateCmd(), newTriggerDescribeCmd(), newTriggerListCmd(), newTriggerDeleteCmd())
	return cmd
}

// triggerFlags are the spec flags of `sluice trigger create` and `update`.
type triggerFlags struct {
	ep     endpoint
	name   string
	fs     *pflag.FlagSet
	update bool

	topic, function, start, startTime, onFailureTopic  string
	isolation                                          string
	enabled, bisect                                    bool
	batchSize, maxBatchBytes, parallelization, retries int
	window, backoffInitial, backoffMax, maxAge         time.Duration

	spec catalog.TriggerSpec // by check: the flags' spec (create), or the changed flags' (update)
}

// triggerFlagFields names the catalog field each spec flag sets.
var triggerFlagFields = map[string]string{
	"topic": "topic", "function": "function", "start": "starting_position", "start-time": "starting_timestamp_ms",
	"batch-size": "batch_size", "max-batch-bytes": "max_batch_bytes", "batch-window": "batch_window_ms",
	"parallelization": "parallelization", "max-retries": "max_retries", "retry-backoff-initial": "retry_backoff_initial_ms",
	"retry-backoff-max": "retry_backoff_max_ms", "max-record-age": "max_record_age_ms", "on-failure-topic": "on_failure_topic",
	"isolation": "read_uncommitted",
}

func (f *triggerFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.fs = fs
	f.ep.register(fs)
	if !f.update {
		fs.StringVar(&f.topic, "topic", "", "topic the trigger reads (must exist; cannot change later)")
	}
	fs.StringVar(&f.function, "function", "", "Lambda function: NAME, ACCOUNT:function:NAME or its ARN, optionally with :VERSION or :ALIAS")
	fs.BoolVar(&f.enabled, "enabled", true, "store the trigger enabled (--enabled=false: stored, never run)")
	fs.StringVar(&f.start, "start", "latest", "where to start on a partition with no committed offset: earliest, latest or timestamp (with --start-time)")
	completeValues(cmd, "start", "earliest", "latest", "timestamp")
	fs.StringVar(&f.startTime, "start-time", "", "with --start timestamp: the time to start at, RFC 3339 (2026-12-05T10:00:00Z)")
	fs.IntVar(&f.batchSize, "batch-size", catalog.DefaultTriggerBatchSize, fmt.Sprintf("most records per invocation (1..%d)", catalog.MaxTriggerBatchSize))
	fs.IntVar(&f.maxBatchBytes, "max-batch-bytes", catalog.DefaultTriggerMaxBatchBytes, fmt.Sprintf("most bytes of an invocation's event (1..%d, Lambda's 6 MB payload limit)", catalog.MaxTriggerBatchBytes))
	fs.DurationVar(&f.window, "batch-window", 0, "how long a partial batch waits for more records (0: none; at most 5m)")
	fs.IntVar(&f.parallelization, "parallelization", catalog.DefaultTriggerParallelization, fmt.Sprintf("batches per partition in flight (1: strict partition order; up to %d keep key order)", catalog.MaxTriggerParallelization))
	fs.IntVar(&f.retries, "max-retries", catalog.DefaultTriggerMaxRetries, fmt.Sprintf("retries of a failed batch (1..%d, or -1 for none)", catalog.MaxTriggerRetries))
	fs.DurationVar(&f.backoffInitial, "retry-backoff-initial", catalog.DefaultTriggerRetryBackoffInitial*time.Millisecond, "first retry backoff (exponential, with jitter; at most 15m)")
	fs.DurationVar(&f.backoffMax, "retry-backoff-max", catalog.DefaultTriggerRetryBackoffMax*time.Millisecond, "largest retry backoff (at least --retry-backoff-initial, at most 15m)")
	fs.DurationVar(&f.maxAge, "max-record-age", 0, "records older than this go to --on-failure-topic without an invocation (0: no limit; else 1m..168h)")
	fs.BoolVar(&f.bisect, "bisect-on-error", false, "split a failing batch in halves to find the poison record")
	fs.StringVar(&f.onFailureTopic, "on-failure-topic", "", "topic (DLQ) for records out of retries or age; without one such a record stops the trigger on its partition")
	fs.StringVar(&f.isolation, "isolation", "read_committed", "read_committed: only records written outside transactions and those of committed transactions, once committed; read_uncommitted: also those of open and aborted transactions")
	completeValues(cmd, "isolation", "read_committed", "read_uncommitted")
}

// set reports whether a spec flag counts: every flag on create, the
// changed ones on update.
func (f *triggerFlags) set(flag string) bool { return !f.update || f.fs.Changed(flag) }

func (f *triggerFlags) check(args []string) error {
	var c flagCheck
	f.ep.check(&c)
	if f.name = c.name("trigger", args); f.name != "" {
		if err := catalog.ValidateTriggerName(f.name); err != nil {
			c.badf("%s", catalogReason(err))
		}
	}
	c.oneOf("isolation", f.isolation, "read_committed", "read_uncommitted")
	var startMs int64
	if f.startTime != "" {
		if t, err := time.Parse(time.RFC3339Nano, f.startTime); err != nil || t.UnixMilli() <= 0 {
			c.badf("--start-time %q: want an RFC 3339 time after 1970 (2026-12-05T10:00:00Z)", f.startTime)
		} else {
			startMs = t.UnixMilli()
		}
	}
	s := catalog.TriggerSpec{
		Topic: f.topic, Function: f.function, Enabled: f.enabled,
		StartingPosition: catalog.StartingPosition(f.start), StartingTimestampMs: startMs,
		BatchSize: f.batchSize, MaxBatchBytes: f.maxBatchBytes, BatchWindowMs: f.window.Milliseconds(),
		Parallelization: f.parallelization, MaxRetries: f.retries,
		RetryBackoffInitialMs: f.backoffInitial.Milliseconds(), RetryBackoffMaxMs: f.backoffMax.Milliseconds(),
		MaxRecordAgeMs: f.maxAge.Milliseconds(), BisectOnError: f.bisect, OnFailureTopic: f.onFailureTopic,
		ReadUncommitted: f.isolation == "read_uncommitted",
	}
	if f.update && !f.fs.Changed("start") && f.fs.Changed("start-time") {
		s.StartingPosition = catalog.StartTimestamp // completed with the stored trigger's position
	}
	f.spec = s
	if f.update {
		s = f.updateProbe(s)
	} else if f.start == string(catalog.StartTimestamp) && f.startTime == "" {
		c.badf("--start timestamp needs --start-time")
	}
	// The catalog's own rules, each error under the flag that set the field.
	if err := catalog.ValidateTrigger("x", s); err != nil {
		for _, e := range flattenJoin(err) {
			var ve *catalog.ValidationError
			if !errors.As(e, &ve) {
				c.badf("%v", e)
				continue
			}
			flag := flagOf(ve.Field)
			if flag == "start-time" && f.startTime == "" && !f.update {
				continue // reported above, in flag terms
			}
			if !f.set(flag) {
				continue
			}
			v := f.fs.Lookup(flag).Value
			if v.Type() == "string" {
				c.badf("--%s %q: %s", flag, v.String(), ve.Reason)
			} else {
				c.badf("--%s %s: %s", flag, v.String(), ve.Reason)
			}
		}
	}
	return c.err()
}

// updateProbe is the spec an update's changed flags are checked in: the
// unchanged fields take values that no changed one can conflict with,
// since the stored trigger (not read yet) decides those. The server checks
// the merged spec again.
func (f *triggerFlags) updateProbe(s catalog.TriggerSpec) catalog.TriggerSpec {
	probe := catalog.TriggerSpec{Topic: "x", Function: "f", StartingPosition: catalog.StartTimestamp, StartingTimestampMs: 1,
		RetryBackoffInitialMs: 1, RetryBackoffMaxMs: catalog.MaxTriggerRetryBackoffMs}
	for flag := range triggerFlagFields {
		if !f.fs.Changed(flag) {
			continue
		}
		switch flag {
		case "function":
			probe.Function = s.Function
		case "start":
			probe.StartingPosition = s.StartingPosition
			if s.StartingPosition != catalog.StartTimestamp && !f.fs.Changed("start-time") {
				probe.StartingTimestampMs = 0
			}
		case "start-time":
			probe.StartingTimestampMs = s.StartingTimestampMs
		case "batch-size":
			probe.BatchSize = s.BatchSize
		case "max-batch-bytes":
			probe.MaxBatchBytes = s.MaxBatchBytes
		case "batch-window":
			probe.BatchWindowMs = s.BatchWindowMs
		case "parallelization":
			probe.Parallelization = s.Parallelization
		case "max-retries":
			probe.MaxRetries = s.MaxRetries
		case "retry-backoff-initial":
			probe.RetryBackoffInitialMs = s.RetryBackoffInitialMs
		case "retry-backoff-max":
			probe.RetryBackoffMaxMs = s.RetryBackoffMaxMs
		case "max-record-age":
			probe.MaxRecordAgeMs = s.MaxRecordAgeMs
		case "on-failure-topic":
			probe.OnFailureTopic = s.OnFailureTopic
		case "isolation":
			probe.ReadUncommitted = s.ReadUncommitted
		}
	}
	return probe
}

func flagOf(field string) string {
	for flag, fld := range triggerFlagFields {
		if fld == field {
			return flag
		}
	}
	return field
}

// flattenJoin lists the errors joined in err.
func flattenJoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var cliStartPositions = map[catalog.StartingPosition]sluicev1.TriggerStartingPosition{
	catalog.StartEarliest:  sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST,
	catalog.StartLatest:    sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_LATEST,
	catalog.StartTimestamp: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_TIMESTAMP,
}

func specMsg(s catalog.TriggerSpec) *sluicev1.TriggerSpec {
	return &sluicev1.TriggerSpec{
		Topic: s.Topic, Function: s.Function, Enabled: s.Enabled,
		StartingPosition: cliStartPositions[s.StartingPosition], StartingTimestampMs: s.StartingTimestampMs,
		BatchSize: int32(s.BatchSize), MaxBatchBytes: int32(s.MaxBatchBytes), BatchWindowMs: s.BatchWindowMs,
		Parallelization: int32(s.Parallelization), MaxRetries: int32(s.MaxRetries),
		RetryBackoffInitialMs: s.RetryBackoffInitialMs, RetryBackoffMaxMs: s.RetryBackoffMaxMs,
		MaxRecordAgeMs: s.MaxRecordAgeMs, BisectOnError: s.BisectOnError, OnFailureTopic: s.OnFailureTopic,
		ReadUncommitted: s.ReadUncommitted,
	}
}

func newTriggerCreateCmd() *cobra.Command {
	var f triggerFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "create a trigger: a topic bound to a Lambda function",
		Long: `Creates trigger NAME reading --topic (which must exist) and invoking --function with
batches of its records. Every setting has a default; sluice trigger describe shows them.
The fetch service starts running it within seconds (sluice dev: --lambda-endpoint sets
where functions are invoked).`,
		Example: `  sluice trigger create orders-fn --topic orders --function orders-handler
  sluice trigger create audit --topic events --function arn:aws:lambda:us-east-1:123456789012:function:audit:live \
      --start earliest --batch-size 500 --parallelization 4 --on-failure-topic events-dlq --bisect-on-error`,
		PreRunE: func(_ *cobra.Command, args []string) error { return f.check(args) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return triggerCreate(cmd.Context(), f, cmd.OutOrStdout()) },
	}
	f.register(cmd)
	return cmd
}

func newTriggerUpdateCmd() *cobra.Command {
	f := triggerFlags{update: true}
	cmd := &cobra.Command{
		Use:   "update NAME",
		Short: "change a trigger's settings",
		Long: `Changes the settings given as flags of trigger NAME and keeps the others. It reads the
trigger and writes it back at the version read: if it changed in between, the update fails
and can be run again. The topic cannot change (create another trigger). Flags not given
keep the trigger's values: the defaults below apply to create only.`,
		Example: `  sluice trigger update orders-fn --batch-size 1000 --batch-window 200ms
  sluice trigger update orders-fn --enabled=false`,
		PreRunE: func(_ *cobra.Command, args []string) error { return f.check(args) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return triggerUpdate(cmd.Context(), f, cmd.OutOrStdout()) },
	}
	f.register(cmd)
	return cmd
}

func triggerCreate(ctx context.Context, f triggerFlags, stdout io.Writer) error {
	resp, err := f.ep.admin().CreateTrigger(ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: f.name, Spec: specMsg(f.spec)}))
	if err != nil {
		return err
	}
	t := resp.Msg.GetTrigger()
	fmt.Fprintf(stdout, "created trigger %s: topic %s -> function %s (%s)\n", t.GetName(), t.GetSpec().GetTopic(), t.GetSpec().GetFunction(), t.GetStateMessage())
	return nil
}

func triggerUpdate(ctx context.Context, f triggerFlags, stdout io.Writer) error {
	admin := f.ep.admin()
	cur, err := admin.DescribeTrigger(ctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: f.name}))
	if err != nil {
		return err
	}
	old := cur.Msg.GetTrigger()
	m := old.GetSpec()
	for flag := range triggerFlagFields {
		if !f.fs.Changed(flag) {
			continue
		}
		n := specMsg(f.spec)
		switch flag {
		case "function":
			m.Function = n.Function
		case "start":
			m.StartingPosition = n.StartingPosition
			if f.spec.StartingPosition != catalog.StartTimestamp && !f.fs.Changed("start-time") {
				m.StartingTimestampMs = 0
			}
		case "start-time":
			m.StartingTimestampMs = n.StartingTimestampMs
		case "batch-size":
			m.BatchSize = n.BatchSize
		case "max-batch-bytes":
			m.MaxBatchBytes = n.MaxBatchBytes
		case "batch-window":
			m.BatchWindowMs = n.BatchWindowMs
		case "parallelization":
			m.Parallelization = n.Parallelization
		case "max-retries":
			m.MaxRetries = n.MaxRetries
		case "retry-backoff-initial":
			m.RetryBackoffInitialMs = n.RetryBackoffInitialMs
		case "retry-backoff-max":
			m.RetryBackoffMaxMs = n.RetryBackoffMaxMs
		case "max-record-age":
			m.MaxRecordAgeMs = n.MaxRecordAgeMs
		case "on-failure-topic":
			m.OnFailureTopic = n.OnFailureTopic
		case "isolation":
			m.ReadUncommitted = n.ReadUncommitted
		}
	}
	if f.fs.Changed("enabled") {
		m.Enabled = f.enabled
	}
	if f.fs.Changed("bisect-on-error") {
		m.BisectOnError = f.bisect
	}
	resp, err := admin.UpdateTrigger(ctx, connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: f.name, Spec: m, ExpectedVersion: old.GetVersion()}))
	if err != nil {
		return err
	}
	t := resp.Msg.GetTrigger()
	fmt.Fprintf(stdout, "updated trigger %s to version %d (%s)\n", t.GetName(), t.GetVersion(), t.GetStateMessage())
	return nil
}

// newTriggerNameCmd is a trigger command that takes a name and --addr only.
func newTriggerNameCmd(use, short, long string, run func(ctx context.Context, ep endpoint, name string, stdout io.Writer) error) *cobra.Command {
	return newNameCmd("trigger", use, short, long, run)
}

func newTriggerDescribeCmd() *cobra.Command {
	return newTriggerNameCmd("describe", "print a trigger's settings and state",
		"Prints trigger NAME's settings (defaults included), version, times and state.", triggerDescribe)
}

func newTriggerDeleteCmd() *cobra.Command {
	return newTriggerNameCmd("delete", "delete a trigger", "Deletes trigger NAME.", triggerDelete)
}

func newTriggerListCmd() *cobra.Command {
	return newListCmd("print all triggers: name, topic, function and state", triggerList)
}

func triggerDescribe(ctx context.Context, ep endpoint, name string, stdout io.Writer) error {
	resp, err := ep.admin().DescribeTrigger(ctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: name}))
	if err != nil {
		return err
	}
	t := resp.Msg.GetTrigger()
	s := t.GetSpec()
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	start := map[sluicev1.TriggerStartingPosition]string{
		sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST:  "earliest",
		sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_LATEST:    "latest",
		sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_TIMESTAMP: "timestamp",
	}[s.GetStartingPosition()]
	if s.GetStartingPosition() == sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_TIMESTAMP {
		start += " " + time.UnixMilli(s.GetStartingTimestampMs()).UTC().Format(time.RFC3339Nano)
	}
	retries := strconv.Itoa(int(s.GetMaxRetries()))
	if s.GetMaxRetries() < 0 {
		retries = "none"
	}
	age, dlq := "no limit", "none (a failed record stops the trigger on its partition)"
	if s.GetMaxRecordAgeMs() > 0 {
		age = ms(s.GetMaxRecordAgeMs())
	}
	if s.GetOnFailureTopic() != "" {
		dlq = s.GetOnFailureTopic()
	}
	isolation := "read_committed"
	if s.GetReadUncommitted() {
		isolation = "read_uncommitted"
	}
	for _, kv := range [][2]string{
		{"trigger", t.GetName()},
		{"state", t.GetStateMessage()},
		{"topic", s.GetTopic() + " (id " + t.GetTopicId() + ")"},
		{"function", s.GetFunction()},
		{"enabled", strconv.FormatBool(s.GetEnabled())},
		{"start", start},
		{"batch size", strconv.Itoa(int(s.GetBatchSize())) + " records"},
		{"max batch bytes", strconv.Itoa(int(s.GetMaxBatchBytes()))},
		{"batch window", ms(s.GetBatchWindowMs())},
		{"parallelization", strconv.Itoa(int(s.GetParallelization()))},
		{"max retries", retries},
		{"retry backoff", ms(s.GetRetryBackoffInitialMs()) + " .. " + ms(s.GetRetryBackoffMaxMs())},
		{"max record age", age},
		{"bisect on error", strconv.FormatBool(s.GetBisectOnError())},
		{"on failure topic", dlq},
		{"isolation", isolation},
		{"version", strconv.FormatInt(t.GetVersion(), 10)},
		{"created", time.UnixMilli(t.GetCreatedAtMs()).UTC().Format(time.RFC3339)},
		{"updated", time.UnixMilli(t.GetUpdatedAtMs()).UTC().Format(time.RFC3339)},
	} {
		fmt.Fprintf(stdout, "%-17s %s\n", kv[0]+":", kv[1])
	}
	if r := t.GetRunAs(); r != "" {
		fmt.Fprintf(stdout, "%-17s %s\n", "runs as:", r)
	}
	if g := resp.Msg.GetGroup(); g != "" {
		copies := fmt.Sprintf("%d fetch copies run it", resp.Msg.GetMembers())
		if resp.Msg.GetMembers() == 1 {
			copies = "1 fetch copy runs it"
		}
		fmt.Fprintf(stdout, "%-17s %s (%s)\n", "group:", g, copies)
	}
	if parts := resp.Msg.GetPartitions(); len(parts) > 0 {
		fmt.Fprintf(stdout, "\n%-9s %-12s %-12s %-10s %-11s %s\n", "PARTITION", "COMMITTED", "END", "LAG", "STATE", "LAST ERROR")
		num := func(v int64) string {
			if v < 0 {
				return "-"
			}
			return strconv.FormatInt(v, 10)
		}
		for _, p := range parts {
			lastErr := p.GetLastError()
			if at := p.GetLastErrorAtMs(); at > 0 {
				lastErr = time.UnixMilli(at).UTC().Format(time.RFC3339) + " " + lastErr
			}
			state := p.GetState()
			if state == "" {
				state = "-"
			}
			fmt.Fprintf(stdout, "%-9d %-12s %-12s %-10s %-11s %s\n", p.GetPartition(), num(p.GetCommittedOffset()), num(p.GetEndOffset()), num(p.GetLag()), state, lastErr)
		}
	}
	return nil
}

func triggerList(ctx context.Context, ep endpoint, stdout io.Writer) error {
	admin := ep.admin()
	token := ""
	fmt.Fprintf(stdout, "%-24s %-24s %-40s %s\n", "NAME", "TOPIC", "FUNCTION", "STATE")
	for {
		resp, err := admin.ListTriggers(ctx, connect.NewRequest(&sluicev1.ListTriggersRequest{PageToken: token}))
		if err != nil {
			return err
		}
		for _, t := range resp.Msg.GetTriggers() {
			state := "enabled"
			if t.GetState() == sluicev1.TriggerState_TRIGGER_STATE_DISABLED {
				state = "disabled"
			}
			fmt.Fprintf(stdout, "%-24s %-24s %-40s %s\n", t.GetName(), t.GetSpec().GetTopic(), t.GetSpec().GetFunction(), state)
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return nil
		}
	}
}

func triggerDelete(ctx context.Context, ep endpoint, name string, stdout io.Writer) error {
	if _, err := ep.admin().DeleteTrigger(ctx, connect.NewRequest(&sluicev1.DeleteTriggerRequest{Name: name})); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted trigger %s\n", name)
	return nil
}
