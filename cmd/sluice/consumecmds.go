package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
)

// maxFollowPartitions bounds `sluice consume --follow` without --group and
// --partition: one long poll per partition.
const maxFollowPartitions = 256

// groupStartWait bounds how long `sluice consume --group` without --follow
// waits for its first lease.
const groupStartWait = 15 * time.Second

// pollSlice bounds one Poll of `sluice consume --group`, so that it checks
// --idle and commits while nothing comes.
const pollSlice = 250 * time.Millisecond

// defaultCLICommitInterval is how often `sluice consume --group` commits
// what it printed unless --commit-interval says otherwise: short, since a
// member that dies re-prints (at least once) what it printed since.
const defaultCLICommitInterval = time.Second

// consumeFlags are `sluice consume`'s parsed arguments.
type consumeFlags struct {
	ep        endpoint
	topic     string
	group     string
	partition int // -1: every partition
	from      sluice.Position
	// fromOffset: from is an offset (a partition's; several need --partition).
	fromOffset bool
	follow     bool
	count      int // 0: no limit
	format     string
	idle       time.Duration
	// isolation: read_uncommitted (every stored record) or
	// read_committed (committed transactions' and non-transactional
	// records only).
	isolation string
	// Group members only.
	commitInterval time.Duration
	sessionTimeout time.Duration // 0: the server's
	stderr         io.Writer     // warnings (failed commits)
	// decode: print values framed by a schema registry serializer as
	// JSON, decoded with their schema.
	decode bool
}

// newConsumeCmd is `sluice consume`; run does what the checked command
// line says (consume, or a test that looks at it).
func newConsumeCmd(run func(ctx context.Context, f consumeFlags, stdout, stderr io.Writer) error) *cobra.Command {
	var f consumeFlags
	var from string
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "print a topic's records, directly or as a member of a consumer group",
		Long: `Prints records. Without --group it reads the partitions directly (nothing is committed) and,
without --follow, stops at the end each partition had when reading began. With --group it joins
the group, reads the partitions leased to it from the group's committed offsets, and commits
what it printed (every --commit-interval and at exit); without --follow it stops once idle for --idle.

Text output is one record a line: partition, offset, key, value, tab-separated (Go-quoted when
not printable). JSON output is one object a line (bytes that are not UTF-8 as key_base64 and
value_base64). --decode prints values written by a schema registry serializer (Confluent's wire
format: magic byte 0, schema id, datum) as JSON, decoded with the schema the registry holds for
their id — Avro, Protobuf (protojson's form) or JSON Schema; other values print as they are,
with a warning.`,
		Example: `  sluice consume orders
  sluice consume orders --partition 0 --from 2026-12-01T10:00:00Z --count 10
  sluice consume orders --group billing --format json --follow
  sluice consume orders --decode`,
		PreRunE: func(cmd *cobra.Command, args []string) error { return f.check(cmd.Flags(), from, args) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.ep.register(fs)
	fs.StringVar(&f.group, "group", "", "consume as a member of this consumer group (leases, committed offsets)")
	fs.IntVar(&f.partition, "partition", -1, fmt.Sprintf("read only this partition, 0..%d (without --group; -1: every partition)", catalog.MaxPartitions-1))
	fs.StringVar(&from, "from", "earliest", "where to start: earliest, latest, an OFFSET (of one partition: with --partition on a topic of several), or a TIME (RFC 3339, e.g. 2026-12-01T10:00:00Z); with --group only earliest or latest, for partitions without a committed offset")
	fs.BoolVar(&f.follow, "follow", false, "keep waiting for new records (until Ctrl-C or --count)")
	fs.IntVar(&f.count, "count", 0, "stop after this many records (0: no limit)")
	fs.StringVar(&f.format, "format", "text", "output: text or json")
	fs.BoolVar(&f.decode, "decode", false, "print values framed by a schema registry serializer as JSON, decoded with their schema (Avro, Protobuf, JSON Schema)")
	fs.StringVar(&f.isolation, "isolation", "read_uncommitted", "read_uncommitted: every stored record; read_committed: only records written outside transactions and those of committed transactions (stops at the last stable offset while a transaction is open)")
	fs.DurationVar(&f.idle, "idle", 2*time.Second, "with --group and without --follow: stop once no record came for this long")
	fs.DurationVar(&f.commitInterval, "commit-interval", defaultCLICommitInterval, fmt.Sprintf("with --group: how often to commit what was printed, %v..%v (and always at exit)", sluice.MinAutoCommitInterval, sluice.MaxAutoCommitInterval))
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 0, fmt.Sprintf("with --group: how long the group waits for this member when it goes silent before its partitions move, %v..%v (0: the server's, 10s)", sluice.MinSessionTimeout, sluice.MaxSessionTimeout))
	completeValues(cmd, "format", "text", "json")
	completeValues(cmd, "isolation", "read_uncommitted", "read_committed")
	completeValues(cmd, "from", "earliest", "latest")
	return cmd
}

// readCommitted is the read option --isolation asks for.
func (f *consumeFlags) readCommitted() sluice.ReadOption {
	return sluice.WithReadCommitted(f.isolation == "read_committed")
}

// check checks `sluice consume`'s command line; args hold the topic.
func (f *consumeFlags) check(fs *pflag.FlagSet, from string, args []string) error {
	var c flagCheck
	f.ep.check(&c)
	switch {
	case len(args) == 0:
		c.badf("give the topic to read: sluice consume TOPIC")
	case len(args) > 1:
		c.badf("one topic at a time (got %q)", args)
	default:
		f.topic = args[0]
	}
	var err error
	if f.from, err = sluice.ParsePosition(from); err != nil {
		c.badf("--from: %v", err)
	}
	_, offErr := strconv.ParseInt(from, 10, 64)
	f.fromOffset = err == nil && offErr == nil
	c.oneOf("format", f.format, "text", "json")
	c.oneOf("isolation", f.isolation, "read_uncommitted", "read_committed")
	if f.count < 0 {
		c.badf("--count %d: want 0 (no limit) or more", f.count)
	}
	if f.partition < -1 || f.partition >= catalog.MaxPartitions {
		c.badf("--partition %d: want -1 (every partition) or a partition 0..%d", f.partition, catalog.MaxPartitions-1)
	}
	if f.group == "" {
		for _, name := range []string{"commit-interval", "session-timeout", "idle"} {
			if fs.Changed(name) {
				c.badf("--%s applies to group members only (--group G)", name)
			}
		}
	} else {
		if f.partition >= 0 {
			c.badf("--partition reads one partition outside any group; with --group the group decides the partitions: drop one of them")
		}
		if from != "earliest" && from != "latest" && err == nil {
			c.badf("with --group, --from is earliest or latest (it applies only to partitions the group has no committed offset for); to move the group's offsets run 'sluice group reset %s --topic %s --to %s' while no member runs", f.group, f.topic, from)
		}
		if f.follow && fs.Changed("idle") {
			c.badf("--idle ends a read without --follow; with --follow, stop with Ctrl-C or --count")
		}
	}
	if f.idle <= 0 {
		c.badf("--idle %v: want a positive duration", f.idle)
	}
	if f.commitInterval < sluice.MinAutoCommitInterval || f.commitInterval > sluice.MaxAutoCommitInterval {
		c.badf("--commit-interval %v: want %v..%v", f.commitInterval, sluice.MinAutoCommitInterval, sluice.MaxAutoCommitInterval)
	}
	if f.sessionTimeout != 0 && (f.sessionTimeout < sluice.MinSessionTimeout || f.sessionTimeout > sluice.MaxSessionTimeout) {
		c.badf("--session-timeout %v: want 0 (the server's) or %v..%v", f.sessionTimeout, sluice.MinSessionTimeout, sluice.MaxSessionTimeout)
	}
	return c.err()
}

// consume is `sluice consume`.
func consume(ctx context.Context, f consumeFlags, stdout, stderr io.Writer) error {
	f.stderr = stderr
	c, err := f.ep.client()
	if err != nil {
		return err
	}
	defer c.Close()
	out := &recordPrinter{w: stdout, json: f.format == "json", limit: f.count}
	if f.decode {
		out.decode = newValueDecoder(ctx, f.ep.registry(), stderr)
	}
	if f.group != "" {
		err = consumeGroup(ctx, c, f, out)
	} else {
		err = consumePartitions(ctx, c, f, out)
	}
	if ctx.Err() != nil {
		return out.failed() // Ctrl-C: a normal way to stop
	}
	return explain(err, f.ep.addr)
}

// recordPrinter prints records, at most limit (0: no limit), from any
// goroutine.
type recordPrinter struct {
	w     io.Writer
	json  bool
	limit int
	// decode, when set, turns a value into the JSON to print (ok false:
	// print it as it is).
	decode func(value []byte) (json []byte, ok bool)

	mu  sync.Mutex
	n   int
	err error
}

// print prints r unless the limit was reached; it reports whether the
// record was printed and whether more may be.
func (p *recordPrinter) print(r *sluice.ConsumedRecord) (printed, more bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil || (p.limit > 0 && p.n >= p.limit) {
		return false, false
	}
	var decoded []byte
	if p.decode != nil {
		if d, ok := p.decode(r.Value); ok {
			decoded = d
		}
	}
	switch {
	case p.json:
		m := jsonRecord(r)
		if decoded != nil {
			delete(m, "value_base64")
			m["value"] = json.RawMessage(decoded)
		}
		p.err = json.NewEncoder(p.w).Encode(m)
	case decoded != nil:
		_, p.err = fmt.Fprintf(p.w, "%d\t%d\t%s\t%s\n", r.Partition, r.Offset, text(r.Key), decoded)
	default:
		_, p.err = fmt.Fprintf(p.w, "%d\t%d\t%s\t%s\n", r.Partition, r.Offset, text(r.Key), text(r.Value))
	}
	p.n++
	return p.err == nil, p.err == nil && (p.limit == 0 || p.n < p.limit)
}

func (p *recordPrinter) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil || (p.limit > 0 && p.n >= p.limit)
}

func (p *recordPrinter) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// text prints b as is when it is printable UTF-8 without tabs or line
// breaks, else Go-quoted.
func text(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) || r == '\t' }) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// jsonRecord is a record for --format json.
func jsonRecord(r *sluice.ConsumedRecord) map[string]any {
	m := map[string]any{
		"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
		"timestamp": r.Timestamp.UTC().Format(time.RFC3339Nano),
	}
	putBytes(m, "key", r.Key)
	putBytes(m, "value", r.Value)
	if len(r.Headers) > 0 {
		hs := make([]map[string]any, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = map[string]any{"key": h.Key}
			putBytes(hs[i], "value", h.Value)
		}
		m["headers"] = hs
	}
	return m
}

// putBytes sets name to b as a string when it is UTF-8, else name_base64;
// nothing for nil.
func putBytes(m map[string]any, name string, b []byte) {
	switch {
	case b == nil:
	case utf8.Valid(b):
		m[name] = string(b)
	default:
		m[name+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

// consumePartitions reads partitions with Readers: one after the other up
// to the end they had at the start, or all at once with --follow.
func consumePartitions(ctx context.Context, c *sluice.Client, f consumeFlags, out *recordPrinter) error {
	info, err := c.DescribeTopic(ctx, f.topic)
	if err != nil {
		return err
	}
	n := len(info.GetPartitions())
	parts := make([]int32, 0, n)
	if f.partition >= 0 {
		if f.partition >= n {
			return fmt.Errorf("topic %s has %d partitions (0..%d); --partition %d does not exist", f.topic, n, n-1, f.partition)
		}
		parts = append(parts, int32(f.partition))
	} else {
		if f.fromOffset && n > 1 {
			return fmt.Errorf("--from %v is an offset, and offsets are per partition: topic %s has %d; name one with --partition N (0..%d)", f.from, f.topic, n, n-1)
		}
		for p := range n {
			parts = append(parts, int32(p))
		}
	}
	if !f.follow {
		for _, p := range parts {
			if err := readToEnd(ctx, c, f, p, out); err != nil || out.done() {
				return errors.Join(err, out.failed())
			}
		}
		return out.failed()
	}
	if len(parts) > maxFollowPartitions {
		return fmt.Errorf("topic %s has %d partitions; --follow reads at most %d at once without a group: use --group G (the group spreads them) or --partition N", f.topic, len(parts), maxFollowPartitions)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(parts))
	for _, p := range parts {
		go func() {
			err := follow(ctx, c, f, p, out)
			if out.done() {
				cancel()
			}
			errs <- err
		}()
	}
	var all []error
	for range parts {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			all = append(all, err)
			cancel()
		}
	}
	return errors.Join(append(all, out.failed())...)
}

// readToEnd prints partition p from f.from up to the high watermark of
// the first answer.
func readToEnd(ctx context.Context, c *sluice.Client, f consumeFlags, p int32, out *recordPrinter) error {
	r, err := c.NewReader(f.topic, p, sluice.StartAt(f.from), sluice.WithFetchMaxWait(0), f.readCommitted())
	if err != nil {
		return err
	}
	defer r.Close()
	end := int64(-1)
	for {
		recs, err := r.Poll(ctx)
		if err != nil {
			return err
		}
		if end < 0 {
			end = r.HighWatermark()
		}
		for i := range recs {
			if recs[i].Offset >= end {
				return nil
			}
			if _, more := out.print(&recs[i]); !more {
				return nil
			}
		}
		if r.Offset() >= end {
			return nil
		}
	}
}

// follow prints partition p until ctx ends or the printer is done.
func follow(ctx context.Context, c *sluice.Client, f consumeFlags, p int32, out *recordPrinter) error {
	r, err := c.NewReader(f.topic, p, sluice.StartAt(f.from), f.readCommitted())
	if err != nil {
		return err
	}
	defer r.Close()
	for !out.done() {
		recs, err := r.Poll(ctx)
		if err != nil {
			return err
		}
		for i := range recs {
			if _, more := out.print(&recs[i]); !more {
				return nil
			}
		}
	}
	return nil
}

// consumeGroup consumes as a group member. It commits exactly what it
// printed (auto-commit would also count records a Poll returned beyond
// --count), every --commit-interval and when it stops. A commit fenced
// because the partition moved to another member (or refused because it
// is no longer assigned) is reported on stderr and consuming goes on (the new owner resumes from the last commit that
// counted).
func consumeGroup(ctx context.Context, c *sluice.Client, f consumeFlags, out *recordPrinter) (err error) {
	host, _ := os.Hostname()
	k, err := c.NewConsumer(f.group, []string{f.topic}, sluice.StartAt(f.from), f.readCommitted(), sluice.WithAutoCommit(0),
		sluice.WithSessionTimeout(f.sessionTimeout),
		sluice.WithClientInfo(fmt.Sprintf("sluice consume host=%s pid=%d", host, os.Getpid())))
	if err != nil {
		return err
	}
	printed := make(map[sluice.TopicPartition]int64)
	commit := func(ctx context.Context) error {
		offsets := make(map[sluice.TopicPartition]int64)
		for _, tp := range k.Assignment() {
			if o, ok := printed[tp]; ok {
				offsets[tp] = o
			}
		}
		clear(printed)
		if len(offsets) == 0 {
			return nil
		}
		err := k.CommitOffsets(ctx, offsets)
		// ErrNotAssigned: the assignment changed between Assignment and
		// the commit (the session ended while this process was paused, say,
		// and the consumer let its partitions go): the same as fenced.
		if errors.Is(err, sluice.ErrFenced) || errors.Is(err, sluice.ErrNotAssigned) {
			fmt.Fprintf(f.stderr, "sluice consume: commit failed, the partitions moved to another member (their records may be printed again there): %v\n", err)
			return nil
		}
		return err
	}
	defer func() {
		// Commit and leave even after Ctrl-C.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, commit(cctx), k.Close(cctx))
	}()
	start, lastCommit := time.Now(), time.Now()
	var active time.Time // the last record, or the first lease
	for !out.done() {
		// Poll in short slices so that idleness and the commit interval
		// are checked while nothing comes.
		pctx, cancel := context.WithTimeout(ctx, pollSlice)
		recs, err := k.Poll(pctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
		now := time.Now()
		if len(recs) > 0 || (active.IsZero() && len(k.Assignment()) > 0) {
			active = now
		}
		for i := range recs {
			if ok, _ := out.print(&recs[i]); !ok {
				break
			}
			printed[sluice.TopicPartition{Topic: recs[i].Topic, Partition: recs[i].Partition}] = recs[i].Offset + 1
		}
		if now.Sub(lastCommit) >= f.commitInterval {
			lastCommit = now
			if err := commit(ctx); err != nil {
				return err
			}
		}
		if f.follow {
			continue
		}
		if active.IsZero() && now.Sub(start) >= groupStartWait {
			return fmt.Errorf("no partition of %s was leased to this member within %v: other members of group %s may hold them all ('sluice group describe %s')", f.topic, groupStartWait, f.group, f.group)
		}
		if !active.IsZero() && now.Sub(active) >= f.idle {
			return out.failed() // idle: done
		}
	}
	return out.failed()
}

func newGroupCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "group",
		Short: "list, describe or reset consumer groups",
		Long:  "Lists, describes or resets consumer groups through the admin API of a Sluice (sluice dev, or a fetch copy).",
	})
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd(), newGroupResetCmd())
	return cmd
}

func newGroupListCmd() *cobra.Command {
	var ep endpoint
	cmd := &cobra.Command{
		Use:   "list",
		Short: "print the names of all consumer groups",
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var c flagCheck
			ep.check(&c)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := ep.client()
			if err != nil {
				return err
			}
			defer c.Close()
			groups, err := c.ListGroups(cmd.Context())
			if err != nil {
				return explain(err, ep.addr)
			}
			for _, g := range groups {
				fmt.Fprintln(cmd.OutOrStdout(), g)
			}
			return nil
		},
	}
	ep.register(cmd.Flags())
	return cmd
}

func newGroupDescribeCmd() *cobra.Command {
	var ep endpoint
	var group string
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "print a group's live members and its partitions' owners, offsets and lag",
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			group = c.name("group", args)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := ep.client()
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := c.DescribeGroup(cmd.Context(), group)
			if err != nil {
				return explainGroup(err, ep.addr, group)
			}
			printGroup(cmd.OutOrStdout(), d)
			return nil
		},
	}
	ep.register(cmd.Flags())
	return cmd
}

func newGroupResetCmd() *cobra.Command {
	var ep endpoint
	var group, topic, to, partitions string
	var dryRun bool
	var req resetArgs
	cmd := &cobra.Command{
		Use:   "reset GROUP --topic T --to earliest|latest|OFFSET|TIME",
		Short: "move a consumer group's committed offsets of one topic",
		Long: `Moves the group's committed offsets of one topic (backwards too), on every partition or
on --partitions. OFFSET is clamped to each partition's valid range, TIME is RFC 3339.
The group must have no live members.`,
		Example: `  sluice group reset billing --topic orders --to earliest --dry-run
  sluice group reset billing --topic orders --to 2026-12-01T10:00:00Z --partitions 0,2`,
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			group = c.name("group", args)
			var err error
			if req, err = parseReset(topic, to, partitions); err != nil {
				c.badf("%v", err)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := ep.client()
			if err != nil {
				return err
			}
			defer c.Close()
			parts, err := c.ResetGroupOffsets(cmd.Context(), group, topic, req.to, sluice.ResetOptions{Partitions: req.partitions, DryRun: dryRun})
			if err != nil {
				return explainGroup(err, ep.addr, group)
			}
			stdout := cmd.OutOrStdout()
			printPartitions(stdout, parts)
			if dryRun {
				fmt.Fprintln(stdout, "dry run: nothing stored; run again without --dry-run to store these offsets")
			} else {
				fmt.Fprintf(stdout, "reset %d partitions of %s for group %s\n", len(parts), topic, group)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	ep.register(fs)
	fs.StringVar(&topic, "topic", "", "topic whose offsets to reset (required)")
	fs.StringVar(&to, "to", "", "target: earliest, latest, OFFSET or TIME (required)")
	fs.StringVar(&partitions, "partitions", "", "comma-separated partitions to reset (default all)")
	fs.BoolVar(&dryRun, "dry-run", false, "show the new offsets without storing them")
	completeValues(cmd, "to", "earliest", "latest")
	return cmd
}

type resetArgs struct {
	to         sluice.Position
	partitions []int32
}

// parseReset checks `sluice group reset`'s flags, all of them.
func parseReset(topic, to, partitions string) (resetArgs, error) {
	var r resetArgs
	var errs []error
	if topic == "" {
		errs = append(errs, errors.New("--topic is required (one topic at a time)"))
	}
	var err error
	if to == "" {
		errs = append(errs, errors.New("--to is required: earliest, latest, OFFSET or TIME"))
	} else if r.to, err = sluice.ParsePosition(to); err != nil {
		errs = append(errs, fmt.Errorf("--to: %w", err))
	}
	for _, s := range splitList(partitions) {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 0 || p >= catalog.MaxPartitions {
			errs = append(errs, fmt.Errorf("--partitions: %q is not a partition number 0..%d", s, catalog.MaxPartitions-1))
			continue
		}
		r.partitions = append(r.partitions, int32(p))
	}
	return r, errors.Join(errs...)
}

func printGroup(w io.Writer, d *sluicev1.DescribeGroupResponse) {
	fmt.Fprintf(w, "group %s: %d live members\n", d.GetGroup(), len(d.GetMembers()))
	if len(d.GetMembers()) > 0 {
		fmt.Fprintf(w, "%-36s %-24s %s\n", "MEMBER", "LAST HEARTBEAT", "CLIENT")
		for _, m := range d.GetMembers() {
			fmt.Fprintf(w, "%-36s %-24s %s\n", m.GetMemberId(), time.UnixMilli(m.GetLastHeartbeatMs()).UTC().Format(time.RFC3339), m.GetClient())
		}
	}
	printPartitions(w, d.GetPartitions())
}

func printPartitions(w io.Writer, parts []*sluicev1.GroupPartition) {
	// STABLE is the last stable offset, where read_committed members stop
	// while a transaction is open (END when none is).
	fmt.Fprintf(w, "%-24s %-10s %-36s %-6s %-12s %-12s %-12s %s\n", "TOPIC", "PARTITION", "OWNER", "EPOCH", "COMMITTED", "END", "STABLE", "LAG")
	dash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	for _, p := range parts {
		owner := p.GetOwner()
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(w, "%-24s %-10d %-36s %-6d %-12s %-12s %-12s %s\n", p.GetTopic(), p.GetPartition(), owner, p.GetEpoch(),
			dash(p.GetCommittedOffset()), dash(p.GetEndOffset()), dash(p.GetLastStableOffset()), dash(p.GetLag()))
	}
}

// explain adds what to do to errors a user can act on.
func explain(err error, addr string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach Sluice at %s: is 'sluice dev' running? (--addr sets the address): %w", addr, err)
	case errors.Is(err, sluice.ErrUnknownTopic):
		return fmt.Errorf("%w (create it with 'sluice topic create NAME'; 'sluice topic list' lists topics)", err)
	case connect.CodeOf(err) == connect.CodeUnimplemented:
		return fmt.Errorf("the server at %s does not serve consuming (no fetch service): %w", addr, err)
	case errors.Is(err, sluice.ErrOffsetOutOfRange):
		return fmt.Errorf("%w (start within the range: --from earliest, latest or an offset in it)", err)
	}
	return err
}

// explainGroup is explain for the group admin commands.
func explainGroup(err error, addr, group string) error {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return fmt.Errorf("%w ('sluice group list' lists the groups; 'sluice topic list' the topics)", err)
	case connect.CodeFailedPrecondition:
		return fmt.Errorf("%w ('sluice group describe %s' lists the live members)", err, group)
	}
	return explain(err, addr)
}

// maxDecodeWarnings bounds the warnings --decode prints for values it
// cannot decode.
const maxDecodeWarnings = 5

// newValueDecoder returns --decode's decoder: a framed value decoded with
// the schema it names — Avro, Protobuf or JSON Schema — and printed as
// JSON. A value it cannot decode is printed as it is, with a warning (the
// first few).
func newValueDecoder(ctx context.Context, reg *serde.Registry, stderr io.Writer) func([]byte) ([]byte, bool) {
	var mu sync.Mutex
	warned := 0
	return func(value []byte) ([]byte, bool) {
		b, err := reg.JSON(ctx, value)
		if err != nil {
			mu.Lock()
			if warned++; warned <= maxDecodeWarnings {
				fmt.Fprintf(stderr, "sluice consume: --decode: a value printed as it is: %v\n", err)
			}
			mu.Unlock()
			return nil, false
		}
		return b, true
	}
}
