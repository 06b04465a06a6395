package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// clientHTTP speaks cleartext HTTP/2 (gRPC) to a Sluice address.
var clientHTTP = func() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}()

func baseURL(addr string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + addr
}

// addrFlag registers --addr, the Sluice address of the client commands.
func addrFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "addr", devDefaultAddr, "Sluice address, HOST:PORT or http(s)://HOST:PORT (sluice dev's default)")
}

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
	addr       string
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
	addrFlag(fs, &f.addr)
	fs.IntVar(&f.partitions, "partitions", 1, fmt.Sprintf("partitions (1..%d)", catalog.MaxPartitions))
	fs.StringVar(&f.config, "config", "", "topic config as k=v,k=v, e.g. retention.ms=3600000")
	return cmd
}

func (f *topicCreateFlags) check(args []string) error {
	var c flagCheck
	c.serverAddr("addr", f.addr)
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
	resp, err := adminClient(f.addr).CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: f.name, Partitions: int32(f.partitions), Config: f.conf}))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created topic %s with %d partitions\n", resp.Msg.GetTopic().GetName(), len(resp.Msg.GetTopic().GetPartitions()))
	return nil
}

func adminClient(addr string) sluicev1connect.AdminServiceClient {
	return sluicev1connect.NewAdminServiceClient(clientHTTP, baseURL(addr), connect.WithGRPC())
}

// newTopicNameCmd is a topic command that takes a name and --addr only.
func newTopicNameCmd(use, short, long string, run func(ctx context.Context, addr, name string, stdout io.Writer) error) *cobra.Command {
	var addr, name string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Long:  long,
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			c.serverAddr("addr", addr)
			name = c.name("topic", args)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), addr, name, cmd.OutOrStdout()) },
	}
	addrFlag(cmd.Flags(), &addr)
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
	var addr string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "print the names of all topics",
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var c flagCheck
			c.serverAddr("addr", addr)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return topicList(cmd.Context(), addr, cmd.OutOrStdout()) },
	}
	addrFlag(cmd.Flags(), &addr)
	return cmd
}

func topicDescribe(ctx context.Context, addr, name string, stdout io.Writer) error {
	resp, err := adminClient(addr).DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: name}))
	if err != nil {
		return err
	}
	t := resp.Msg.GetTopic()
	fmt.Fprintf(stdout, "topic %s, created %s\n", t.GetName(), time.UnixMilli(t.GetCreatedAtMs()).UTC().Format(time.RFC3339))
	for _, k := range slices.Sorted(maps.Keys(t.GetConfig())) {
		fmt.Fprintf(stdout, "  %s=%s\n", k, t.GetConfig()[k])
	}
	fmt.Fprintf(stdout, "%-10s %-24s %-6s %-12s %s\n", "PARTITION", "OWNER", "EPOCH", "START", "END")
	for _, p := range t.GetPartitions() {
		owner := p.GetOwnerId()
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(stdout, "%-10d %-24s %-6d %-12d %d\n", p.GetPartition(), owner, p.GetEpoch(), p.GetStartOffset(), p.GetEndOffset())
	}
	return nil
}

func topicList(ctx context.Context, addr string, stdout io.Writer) error {
	admin := adminClient(addr)
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

func topicDelete(ctx context.Context, addr, name string, stdout io.Writer) error {
	if _, err := adminClient(addr).DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: name})); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted topic %s\n", name)
	return nil
}

// runProduce is `sluice produce`: values from the arguments, or one per
// line of stdin; with --count, a load run reporting records/s.
func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", devDefaultAddr, "Sluice address (sluice dev's default)")
	topic := fs.String("topic", "", "topic (required)")
	key := fs.String("key", "", "record key (empty: no key, sticky partitioning)")
	partition := fs.Int("partition", -1, "explicit partition (-1: by key, else sticky)")
	count := fs.Int("count", 0, "load mode: produce this many generated records and report the rate")
	size := fs.Int("size", 1024, "load mode: value size in bytes")
	batch := fs.Int("batch", 100, "load mode: records per request")
	inflight := fs.Int("inflight", 16, "load mode: requests in flight on the stream")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice produce --topic T [--key K] [--partition P] [VALUE ...]")
		fmt.Fprintln(stderr, "       sluice produce --topic T --count N [--size B] [--batch R] [--inflight F]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Without values, reads one value per line from stdin. Prints partition and offset")
		fmt.Fprintln(stderr, "of every record once it is durable (acknowledged by the ack quorum of bookies).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *topic == "" {
		return errors.New("--topic is required; see 'sluice produce -h'")
	}
	prod := sluicev1connect.NewProducerServiceClient(clientHTTP, baseURL(*addr), connect.WithGRPC())
	if *count > 0 {
		return produceLoad(ctx, prod, *topic, *count, *size, *batch, *inflight, stdout)
	}
	values := fs.Args()
	if len(values) == 0 {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			values = append(values, sc.Text())
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	req := &sluicev1.ProduceRequest{Topic: *topic}
	if *partition >= 0 {
		p := int32(*partition)
		req.Partition = &p
	}
	for _, v := range values {
		r := &sluicev1.Record{Value: []byte(v)}
		if *key != "" {
			r.Key = []byte(*key)
		}
		req.Records = append(req.Records, r)
	}
	if len(req.Records) == 0 {
		return errors.New("nothing to produce: give values as arguments or on stdin")
	}
	resp, err := prod.Produce(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	for _, r := range resp.Msg.GetResults() {
		fmt.Fprintf(stdout, "partition %d offset %d\n", r.GetPartition(), r.GetOffset())
	}
	return nil
}

// produceLoad pipelines requests of batch records on one ProduceStream.
func produceLoad(ctx context.Context, prod sluicev1connect.ProducerServiceClient, topic string, count, size, batch, inflight int, stdout io.Writer) error {
	if size < 1 || batch < 1 || inflight < 1 {
		return errors.New("--size, --batch and --inflight must be positive")
	}
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
			return fmt.Errorf("request %d failed: code %d: %s", i, e.GetCode(), e.GetMessage())
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
