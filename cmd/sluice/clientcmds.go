package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

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

// runTopic is `sluice topic create|describe|list|delete`.
func runTopic(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: sluice topic create NAME [--partitions N] [--config k=v,...] [--addr A]")
		fmt.Fprintln(stderr, "       sluice topic describe NAME [--addr A]")
		fmt.Fprintln(stderr, "       sluice topic list [--addr A]")
		fmt.Fprintln(stderr, "       sluice topic delete NAME [--addr A]")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		return nil
	}
	verb := args[0]
	fs := flag.NewFlagSet("sluice topic "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", devDefaultAddr, "Sluice address (sluice dev's default)")
	partitions := fs.Int("partitions", 1, "partitions (create)")
	cfg := fs.String("config", "", "topic config as k=v,k=v (create), e.g. retention.ms=3600000")
	// Flags may follow the topic name.
	var name string
	rest := args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if name == "" && fs.NArg() > 0 { // flags before the name, maybe more after it
		name = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		usage()
		return fmt.Errorf("topic %s takes one topic name; unexpected arguments %q", verb, fs.Args())
	}
	admin := sluicev1connect.NewAdminServiceClient(clientHTTP, baseURL(*addr), connect.WithGRPC())
	needName := func() error {
		if name == "" {
			usage()
			return fmt.Errorf("topic %s needs a topic name", verb)
		}
		return nil
	}
	switch verb {
	case "create":
		if err := needName(); err != nil {
			return err
		}
		conf := map[string]string{}
		if *cfg != "" {
			for _, kv := range strings.Split(*cfg, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--config: %q is not k=v", kv)
				}
				conf[k] = v
			}
		}
		resp, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: int32(*partitions), Config: conf}))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created topic %s with %d partitions\n", resp.Msg.GetTopic().GetName(), len(resp.Msg.GetTopic().GetPartitions()))
	case "describe":
		if err := needName(); err != nil {
			return err
		}
		resp, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: name}))
		if err != nil {
			return err
		}
		t := resp.Msg.GetTopic()
		fmt.Fprintf(stdout, "topic %s, created %s\n", t.GetName(), time.UnixMilli(t.GetCreatedAtMs()).UTC().Format(time.RFC3339))
		keys := make([]string, 0, len(t.GetConfig()))
		for k := range t.GetConfig() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
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
	case "list":
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
	case "delete":
		if err := needName(); err != nil {
			return err
		}
		if _, err := admin.DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: name})); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted topic %s\n", name)
	default:
		usage()
		return fmt.Errorf("unknown topic command %q", verb)
	}
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
