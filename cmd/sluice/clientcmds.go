package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
	"github.com/sluicemq/sluice/pkg/sluice/jsonserde"
	"github.com/sluicemq/sluice/services/ingest"
)

// name checks that args is one name (a topic's, a group's) and returns it.
func (c *flagCheck) name(what string, args []string) string {
	switch {
	case len(args) == 0:
		c.badf("needs one %s name", what)
		return ""
	case len(args) > 1:
		c.badf("takes one %s name; unexpected arguments %q", what, args[1:])
	}
	return args[0]
}

func newTopicCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "topic",
		Short: "create, describe, list or delete topics",
		Long:  "Creates, describes, lists or deletes topics through the admin API of a Sluice (sluice dev, or an ingest copy).",
	})
	cmd.AddCommand(newTopicCreateCmd(), newTopicDescribeCmd(), newTopicListCmd(), newTopicDeleteCmd())
	return cmd
}

// topicCreateFlags are `sluice topic create`'s arguments.
type topicCreateFlags struct {
	ep         endpoint
	name       string
	partitions int
	config     string

	conf map[string]string // from config, by check
}

func newTopicCreateCmd() *cobra.Command {
	var f topicCreateFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "create a topic",
		Long: `Creates topic NAME with --partitions partitions and the topic config of --config (the
rest takes the defaults; sluice topic describe shows them all).`,
		Example: `  sluice topic create orders --partitions 4
  sluice topic create events --config retention.ms=3600000,cleanup.policy=delete`,
		PreRunE: func(_ *cobra.Command, args []string) error { return f.check(args) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return topicCreate(cmd.Context(), f, cmd.OutOrStdout()) },
	}
	fs := cmd.Flags()
	f.ep.register(fs)
	fs.IntVar(&f.partitions, "partitions", 1, fmt.Sprintf("partitions (1..%d)", catalog.MaxPartitions))
	fs.StringVar(&f.config, "config", "", "topic config as k=v,k=v, e.g. retention.ms=3600000")
	return cmd
}

func (f *topicCreateFlags) check(args []string) error {
	var c flagCheck
	f.ep.check(&c)
	if f.name = c.name("topic", args); f.name != "" {
		if err := catalog.ValidateTopicName(f.name); err != nil {
			c.badf("%s", catalogReason(err))
		}
	}
	c.intIn("partitions", f.partitions, 1, catalog.MaxPartitions)
	f.conf = map[string]string{}
	for _, kv := range splitList(f.config) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			c.badf("--config: %q is not k=v", kv)
			continue
		}
		f.conf[k] = v
	}
	if _, err := catalog.ParseTopicConfig(f.conf); err != nil {
		c.catalogErrs("--config: ", err)
	}
	return c.err()
}

func topicCreate(ctx context.Context, f topicCreateFlags, stdout io.Writer) error {
	resp, err := f.ep.admin().CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: f.name, Partitions: int32(f.partitions), Config: f.conf}))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created topic %s with %d partitions\n", resp.Msg.GetTopic().GetName(), len(resp.Msg.GetTopic().GetPartitions()))
	return nil
}

// newTopicNameCmd is a topic command that takes a name and --addr only.
// newNameCmd is a client command on one named object of a kind ("topic",
// "trigger"): `KIND USE NAME [--addr]`, the name checked with the kind's
// rules before run is called.
func newNameCmd(kind, use, short, long string, run func(ctx context.Context, ep endpoint, name string, stdout io.Writer) error) *cobra.Command {
	var ep endpoint
	var name string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Long:  long,
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			name = c.name(kind, args)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), ep, name, cmd.OutOrStdout()) },
	}
	ep.register(cmd.Flags())
	return cmd
}

func newTopicNameCmd(use, short, long string, run func(ctx context.Context, ep endpoint, name string, stdout io.Writer) error) *cobra.Command {
	return newNameCmd("topic", use, short, long, run)
}

// newListCmd is a client command with no arguments and only --addr.
func newListCmd(short string, run func(ctx context.Context, ep endpoint, stdout io.Writer) error) *cobra.Command {
	var ep endpoint
	cmd := &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var c flagCheck
			ep.check(&c)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), ep, cmd.OutOrStdout()) },
	}
	ep.register(cmd.Flags())
	return cmd
}

func newTopicDescribeCmd() *cobra.Command {
	return newTopicNameCmd("describe", "print a topic's config and partitions",
		"Prints topic NAME's creation time, its whole config, and each partition's owner (the ingest copy writing it), epoch and offset range.",
		topicDescribe)
}

func newTopicDeleteCmd() *cobra.Command {
	return newTopicNameCmd("delete", "delete a topic",
		"Deletes topic NAME at once: it is gone from describe and list, and the name is free for a new topic. The compactor removes its data later.",
		topicDelete)
}

func newTopicListCmd() *cobra.Command {
	return newListCmd("print the names of all topics", topicList)
}

func topicDescribe(ctx context.Context, ep endpoint, name string, stdout io.Writer) error {
	resp, err := ep.admin().DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: name}))
	if err != nil {
		return err
	}
	t := resp.Msg.GetTopic()
	fmt.Fprintf(stdout, "topic %s, created %s\n", t.GetName(), time.UnixMilli(t.GetCreatedAtMs()).UTC().Format(time.RFC3339))
	for _, k := range slices.Sorted(maps.Keys(t.GetConfig())) {
		fmt.Fprintf(stdout, "  %s=%s\n", k, t.GetConfig()[k])
	}
	fmt.Fprintf(stdout, "%-10s %-24s %-6s %-12s %s\n", "PARTITION", "OWNER", "EPOCH", "START", "END")
	lowerBounds := 0
	for _, p := range t.GetPartitions() {
		owner := p.GetOwnerId()
		if owner == "" {
			owner = "-"
		}
		end := strconv.FormatInt(p.GetEndOffset(), 10)
		if p.GetEndOffsetLowerBound() {
			end, lowerBounds = ">="+end, lowerBounds+1
		}
		fmt.Fprintf(stdout, "%-10d %-24s %-6d %-12d %s\n", p.GetPartition(), owner, p.GetEpoch(), p.GetStartOffset(), end)
	}
	if lowerBounds > 0 {
		fmt.Fprintf(stdout, "END >=N: a lower bound — no copy writing the partition answered, and its last ledger is still open; describe again once a copy owns it (the next produce to it takes it)\n")
	}
	return nil
}

func topicList(ctx context.Context, ep endpoint, stdout io.Writer) error {
	admin := ep.admin()
	token := ""
	for {
		resp, err := admin.ListTopics(ctx, connect.NewRequest(&sluicev1.ListTopicsRequest{PageToken: token}))
		if err != nil {
			return err
		}
		for _, t := range resp.Msg.GetTopics() {
			fmt.Fprintln(stdout, t.GetName())
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return nil
		}
	}
}

func topicDelete(ctx context.Context, ep endpoint, name string, stdout io.Writer) error {
	if _, err := ep.admin().DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: name})); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted topic %s\n", name)
	return nil
}

// Bounds of `sluice produce`'s load runs.
const (
	maxProduceCount = 100_000_000
	// maxProduceInflight is ingest.Config's bound on MaxStreamInFlight
	// (beyond a server's setting, it stops reading the stream).
	maxProduceInflight = 10_000
	// maxProduceRequestBytes is the largest request a Sluice server can be
	// set to accept (rpcserver's bound on MaxRequestBytes).
	maxProduceRequestBytes = 64 << 20
)

// produceFlags are `sluice produce`'s checked arguments.
type produceFlags struct {
	ep        endpoint
	topic     string
	key       string
	partition int // -1: by key, else sticky
	// idempotent: through the SDK's idempotent producer (retried, stored
	// once); else one plain Produce request.
	idempotent bool
	// A load run when count > 0.
	count, size, batch, inflight int
	// encode: the values are JSON, encoded with the latest schema of
	// subject (default: the topic's schema.subject) and framed.
	encode  bool
	subject string
	// values are the records' values; none: one a line of stdin.
	values []string
}

// newProduceCmd is `sluice produce`; run does what the checked command
// line says (produce, or a test that looks at it).
func newProduceCmd(run func(ctx context.Context, f produceFlags, stdin io.Reader, stdout io.Writer) error) *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce --topic T [flags] [VALUE]...",
		Short: "produce records (arguments or stdin), or a load run with --count",
		Long: `Produces one record per VALUE, or without values one per line of stdin (each line
sent as soon as it is read, so "tail -f app.log | sluice produce --topic logs" works; a
line holds at most 64 MiB), and prints the partition and offset of every record, in
order, once it is durable (acknowledged by the ack quorum of bookies). Every record gets
--key (none when empty); --partition picks the partition, else the key does, else the
sticky partitioner. Flags may come after the values; after -- everything is a value.

Records go through the Go SDK's idempotent producer: a failover or throttling is
retried (for up to 30 s) and the server stores each record once, in order.
--idempotent=false reads all of stdin and sends one plain Produce request instead, not
retried (a topic with schema.validation=dlq dead-letters only such plain records).

With --encode each value is JSON, written with the latest version of the topic's
schema.subject (or --subject) in Confluent's wire format, as a schema registry serializer
writes it: an Avro datum in Avro's JSON encoding, or a document a JSON Schema accepts. Such
a topic refuses other values. A record the
topic sent to its dead-letter topic (schema.validation=dlq) is printed as such.

With --count N it is a load run instead: N generated records of --size bytes, --batch
records a request, --inflight requests in flight on one ProduceStream; it prints the
rate and the request latency percentiles.`,
		Example: `  sluice produce --topic orders a b c --key user-7
  echo hello | sluice produce --topic orders
  sluice produce --topic orders --encode '{"id": "o-1"}'
  sluice produce --topic orders -- --not-a-flag
  sluice produce --topic orders --count 20000 --size 1024`,
		PreRunE: func(cmd *cobra.Command, args []string) error { return f.check(cmd.Flags(), args) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), f, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	f.ep.register(fs)
	fs.StringVar(&f.topic, "topic", "", "topic (required)")
	fs.StringVar(&f.key, "key", "", "record key (empty: no key, sticky partitioning)")
	fs.IntVar(&f.partition, "partition", -1, fmt.Sprintf("explicit partition, 0..%d (-1: by key, else sticky)", catalog.MaxPartitions-1))
	fs.BoolVar(&f.idempotent, "idempotent", true, "produce through the SDK's idempotent producer (retried, each record stored once); false: one plain Produce request, not retried")
	fs.BoolVar(&f.encode, "encode", false, "values are JSON (Avro's JSON encoding, or JSON Schema documents), encoded with the latest schema of the topic's schema.subject and framed for the schema registry")
	fs.StringVar(&f.subject, "subject", "", "with --encode: the subject whose latest schema encodes the values (default: the topic's schema.subject)")
	fs.IntVar(&f.count, "count", 0, fmt.Sprintf("load run: produce this many generated records (up to %d) and report the rate", maxProduceCount))
	fs.IntVar(&f.size, "size", 1024, fmt.Sprintf("load run: value size in bytes (1..%d)", catalog.MaxMaxMessageBytes))
	fs.IntVar(&f.batch, "batch", 100, fmt.Sprintf("load run: records per request (1..%d)", ingest.DefaultMaxRecords))
	fs.IntVar(&f.inflight, "inflight", 16, fmt.Sprintf("load run: requests in flight on the stream (1..%d)", maxProduceInflight))
	return cmd
}

// check checks the command line; args are the values.
func (f *produceFlags) check(fs *pflag.FlagSet, args []string) error {
	var c flagCheck
	f.ep.check(&c)
	c.required("topic", f.topic)
	if f.partition < -1 || f.partition >= catalog.MaxPartitions {
		c.badf("--partition %d: want -1 (by key, else sticky) or a partition 0..%d", f.partition, catalog.MaxPartitions-1)
	}
	switch {
	case f.count < 0 || f.count > maxProduceCount:
		c.badf("--count %d: want 0 (no load run) or 1..%d", f.count, maxProduceCount)
	case f.count > 0:
		c.intIn("size", f.size, 1, catalog.MaxMaxMessageBytes)
		c.intIn("batch", f.batch, 1, ingest.DefaultMaxRecords)
		c.intIn("inflight", f.inflight, 1, maxProduceInflight)
		if f.size > 0 && f.batch > 0 && int64(f.size)*int64(f.batch) > maxProduceRequestBytes {
			c.badf("--batch %d of --size %d: requests of %d bytes; want at most %d", f.batch, f.size, int64(f.size)*int64(f.batch), maxProduceRequestBytes)
		}
		for _, name := range []string{"key", "partition", "idempotent", "encode", "subject"} {
			if fs.Changed(name) {
				c.badf("--%s does not apply to a load run (--count), which generates its records", name)
			}
		}
		if len(args) > 0 {
			c.badf("a load run (--count) generates its records; unexpected values %q", args)
		}
	default:
		for _, name := range []string{"size", "batch", "inflight"} {
			if fs.Changed(name) {
				c.badf("--%s applies to load runs only (--count N)", name)
			}
		}
		if f.subject != "" && !f.encode {
			c.badf("--subject applies with --encode only")
		}
	}
	f.values = args
	return c.err()
}

// produceRequest is the request for values.
func produceRequest(f produceFlags, values []string) *sluicev1.ProduceRequest {
	req := &sluicev1.ProduceRequest{Topic: f.topic}
	if f.partition >= 0 {
		p := int32(f.partition)
		req.Partition = &p
	}
	for _, v := range values {
		r := &sluicev1.Record{Value: []byte(v)}
		if f.key != "" {
			r.Key = []byte(f.key)
		}
		req.Records = append(req.Records, r)
	}
	return req
}

// produce is `sluice produce`: the values, or the lines of stdin, or a
// load run.
func produce(ctx context.Context, f produceFlags, stdin io.Reader, stdout io.Writer) error {
	prod := f.ep.producer()
	if f.count > 0 {
		return produceLoad(ctx, prod, f.topic, f.count, f.size, f.batch, f.inflight, stdout)
	}
	var next func() (string, bool, error) // the next value; false at the end
	if len(f.values) > 0 {
		i := 0
		next = func() (string, bool, error) {
			if i == len(f.values) {
				return "", false, nil
			}
			i++
			return f.values[i-1], true, nil
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), maxStdinLine)
		line := 0
		next = func() (string, bool, error) {
			if sc.Scan() {
				line++
				return sc.Text(), true, nil
			}
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				return "", false, fmt.Errorf("line %d of stdin is longer than %d bytes, the most `sluice produce` reads as one record", line+1, maxStdinLine)
			}
			return "", false, sc.Err()
		}
	}
	if f.encode {
		enc, err := newValueEncoder(ctx, f)
		if err != nil {
			return err
		}
		raw, i := next, 0
		next = func() (string, bool, error) {
			v, ok, err := raw()
			if !ok || err != nil {
				return v, ok, err
			}
			i++
			if v, err = enc(ctx, v); err != nil {
				return "", false, fmt.Errorf("--encode: value %d: %w", i, err)
			}
			return v, true, nil
		}
	}
	if f.idempotent {
		return produceIdempotent(ctx, f, next, stdout)
	}
	var values []string
	for {
		v, ok, err := next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return errNothingToProduce
	}
	resp, err := prod.Produce(ctx, connect.NewRequest(produceRequest(f, values)))
	if err != nil {
		return err
	}
	for _, r := range resp.Msg.GetResults() {
		if d := r.GetDeadLetter(); d != nil {
			fmt.Fprintf(stdout, "dead-lettered to %s partition %d offset %d: %s\n", d.GetTopic(), r.GetPartition(), r.GetOffset(), d.GetReason())
			continue
		}
		fmt.Fprintf(stdout, "partition %d offset %d\n", r.GetPartition(), r.GetOffset())
	}
	return nil
}

// errNothingToProduce: no values and an empty stdin.
var errNothingToProduce = errors.New("nothing to produce: give values as arguments or on stdin")

// maxStdinLine bounds a line of stdin, one record's value: the largest
// max.message.bytes a topic takes.
const maxStdinLine = catalog.MaxMaxMessageBytes

// newValueEncoder is --encode: a function that encodes a JSON value with
// the latest schema of the subject and frames it.
func newValueEncoder(ctx context.Context, f produceFlags) (func(context.Context, string) (string, error), error) {
	subject := f.subject
	if subject == "" {
		resp, err := f.ep.admin().DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: f.topic}))
		if err != nil {
			return nil, explain(err, f.ep.addr)
		}
		if subject = resp.Msg.GetTopic().GetConfig()[catalog.KeySchemaSubject]; subject == "" {
			return nil, fmt.Errorf("--encode: topic %q has no %s; name the subject whose schema encodes the values with --subject", f.topic, catalog.KeySchemaSubject)
		}
	}
	latest, err := f.ep.schemas().GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: subject}))
	if err != nil {
		return nil, fmt.Errorf("--encode: the latest schema of subject %q: %w", subject, explain(err, f.ep.addr))
	}
	info := latest.Msg.GetVersion().GetSchema()
	reg := f.ep.registry()
	var ser interface {
		SerializeJSON(context.Context, []byte) ([]byte, error)
	}
	switch schema.Format(info.GetType()) {
	case schema.Avro:
		ser, err = avroserde.NewSerializer(reg, subject, info.GetSchema(), false)
	case schema.JSON:
		ser, err = jsonserde.NewSerializer(reg, subject, info.GetSchema(), false)
	default:
		return nil, fmt.Errorf("--encode: subject %q's latest schema is %s; --encode writes Avro and JSON Schema values (Go programs write Protobuf with pkg/sluice/protoserde)", subject, info.GetType())
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, v string) (string, error) {
		b, err := ser.SerializeJSON(ctx, []byte(v))
		if err != nil {
			return "", fmt.Errorf("(%s): %w", v, err)
		}
		return string(b), nil
	}, nil
}

// produceDeliveryTimeout bounds how long `sluice produce` retries a record.
const produceDeliveryTimeout = 30 * time.Second

// produceIdempotent sends the values next gives, as it gives them (a line
// of stdin goes as soon as it is read: `tail -f log | sluice produce`),
// through the SDK's idempotent producer, and prints each record's partition
// and offset in order, as soon as it and those before it are durable.
func produceIdempotent(ctx context.Context, f produceFlags, next func() (string, bool, error), stdout io.Writer) error {
	c, err := f.ep.client()
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := c.NewProducer(sluice.WithDeliveryTimeout(produceDeliveryTimeout))
	if err != nil {
		return err
	}
	defer func() { _ = p.Close(context.WithoutCancel(ctx)) }()
	var (
		mu      sync.Mutex
		done    = map[int]sluice.Result{} // finished, not printed yet
		printed int                       // records printed (or counted failed)
		failed  []error
		wg      sync.WaitGroup
	)
	// report prints the finished records that follow those printed.
	report := func() {
		for {
			r, ok := done[printed]
			if !ok {
				return
			}
			delete(done, printed)
			switch {
			case r.Err != nil:
				failed = append(failed, fmt.Errorf("record %d: %w", printed, r.Err))
			case r.DeadLetter != nil:
				d := r.DeadLetter
				fmt.Fprintf(stdout, "dead-lettered to %s partition %d offset %d: %s\n", d.Topic, d.Partition, d.Offset, d.Reason)
			default:
				fmt.Fprintf(stdout, "partition %d offset %d\n", r.Partition, r.Offset)
			}
			printed++
		}
	}
	n := 0
	var readErr error
	for {
		v, ok, err := next()
		if err != nil {
			readErr = err
			break
		}
		if !ok {
			break
		}
		r := &sluice.Record{Topic: f.topic, Partition: sluice.AnyPartition, Value: []byte(v)}
		if f.key != "" {
			r.Key = []byte(f.key)
		}
		if f.partition >= 0 {
			r.Partition = int32(f.partition)
		}
		i := n
		n++
		wg.Add(1)
		p.Produce(ctx, r, func(res sluice.Result) {
			mu.Lock()
			done[i] = res
			report()
			mu.Unlock()
			wg.Done()
		})
	}
	flushErr := p.Flush(ctx)
	wg.Wait()
	if readErr != nil {
		return errors.Join(readErr, flushErr)
	}
	if n == 0 {
		return errNothingToProduce
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d records not stored: %w", len(failed), n, errors.Join(failed...))
	}
	return flushErr
}

// produceLoad pipelines requests of batch records on one ProduceStream
// (size, batch and inflight are checked: positive).
func produceLoad(ctx context.Context, prod sluicev1connect.ProducerServiceClient, topic string, count, size, batch, inflight int, stdout io.Writer) error {
	stream := prod.ProduceStream(ctx)
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	requests := (count + batch - 1) / batch
	window := make(chan time.Time, inflight)
	lat := make([]time.Duration, 0, requests)
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() {
		for i := 0; i < requests; i++ {
			n := min(batch, count-i*batch)
			req := &sluicev1.ProduceRequest{Topic: topic, Records: make([]*sluicev1.Record, n)}
			for j := range req.Records {
				req.Records[j] = &sluicev1.Record{Value: value}
			}
			window <- time.Now()
			if err := stream.Send(&sluicev1.ProduceStreamRequest{CorrelationId: uint64(i), Request: req}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseRequest()
	}()
	last := time.Now()
	for i := 0; i < requests; i++ {
		resp, err := stream.Receive()
		if err != nil {
			return fmt.Errorf("after %d of %d requests: %w", i, requests, err)
		}
		lat = append(lat, time.Since(<-window))
		if e := resp.GetError(); e != nil {
			return fmt.Errorf("request %d failed: %v: %s", i, connect.Code(e.GetCode()), e.GetMessage())
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "  %d of %d records acknowledged\n", (i+1)*batch, count)
		}
	}
	if err := <-sendErr; err != nil {
		return err
	}
	_ = stream.CloseResponse()
	secs := time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	fmt.Fprintf(stdout, "%d records of %d B in %.2fs: %.0f records/s, %.1f MB/s; request latency p50 %v p99 %v max %v\n",
		count, size, secs, float64(count)/secs, float64(count)*float64(size)/secs/1e6,
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	return nil
}
