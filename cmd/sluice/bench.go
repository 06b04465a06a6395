package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/loadgen"
	"github.com/sluicemq/sluice/internal/loadgen/kafkadriver"
	"github.com/sluicemq/sluice/internal/loadgen/memdriver"
	"github.com/sluicemq/sluice/internal/loadgen/sluicedriver"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "ledger" {
		return runBenchLedger(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("sluice bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	driver := fs.String("driver", "", "system to load: kafka, sluice (sluice dev or ingest/fetch copies behind one address), or mem (in-process loopback: measures the load generator itself) (required)")
	brokers := fs.String("brokers", "", "kafka: bootstrap brokers, host:port,host:port,... (required for kafka)")
	sluiceAddr := fs.String("sluice-addr", "127.0.0.1:7420", "sluice: sluice dev's address, or an ingest copy's (ProducerService and the topic admin RPCs)")
	sluiceFetchAddr := fs.String("sluice-fetch-addr", "", "sluice: a fetch copy's address for the consumers (default --sluice-addr)")
	pprofAddr := fs.String("pprof", "", "serve the load generator's own /debug/pprof/ (profiles, execution traces) on this address, e.g. 127.0.0.1:17520")
	sluiceSlowBatch := fs.Duration("sluice-slow-batch", 0, "sluice: log produce batches acknowledged later than this after their first record (at most one line a second), with when they were sent")
	sluicePerRecord := fs.Bool("sluice-per-record", false, "sluice: consumers ask for one message per record (as browsers do) instead of the stored record batches")
	workloadPath := fs.String("workload", "", "workload YAML file, e.g. bench/workloads/s1.yaml (required)")
	out := fs.String("out", "", "directory for results.json and results.md (created; required)")
	label := fs.String("label", "", "name of this run in the tables (default \"<driver> <workload name>\")")
	serverPIDs := fs.String("server-pids", "", "server processes to charge CPU to: pid,pid,... or name=pid,...\n(e.g. \"$(localstack/kafka.sh pids)\"); without them no CPU cost is reported")
	rate := fs.Float64("rate", -1, "override the workload's producerRate, messages/s (0: search for the maximum)")
	recoveryRate := fs.Float64("recovery-rate", 0, "override the workload's recoveryRate, messages/s (workloads with a recovery phase)")
	testDur := fs.Duration("test-duration", 0, "override the workload's test duration")
	warmupDur := fs.Duration("warmup-duration", -1, "override the workload's warm-up duration")
	progress := fs.Duration("progress", loadgen.DefaultProgressInterval, "interval of progress lines on stderr")
	drain := fs.Duration("drain-timeout", loadgen.DefaultDrainTimeout, "how long after the window to wait for outstanding sends, acks and deliveries")
	keepTopics := fs.Bool("keep-topics", false, "leave the benchmark's topics in place (default: delete them)")
	kafkaRF := fs.Int("kafka-replication-factor", kafkadriver.DefaultReplicationFactor, "kafka: replication factor of the topics")
	kafkaLinger := fs.Duration("kafka-linger", kafkadriver.DefaultLinger, "kafka: producer linger")
	kafkaCompression := fs.String("kafka-compression", "none", "kafka: producer compression: none, gzip, snappy, lz4, zstd")
	var kafkaTopicConfigs kvFlag
	fs.Var(&kafkaTopicConfigs, "kafka-topic-config", "kafka: topic config key=value, repeatable (e.g. flush.messages=1)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice bench --driver kafka --brokers HOST:PORT,... --workload FILE --out DIR [flags]")
		fmt.Fprintln(stderr, "       sluice bench ledger [flags]   (the ledger tier alone; sluice bench ledger -h)")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs one OpenMessaging-Benchmark-shaped workload against a messaging system and")
		fmt.Fprintln(stderr, "writes results.json and results.md to DIR: publish and end-to-end latency")
		fmt.Fprintln(stderr, "(p50/p99/p99.9/max, measured from each message's intended send time, so queueing")
		fmt.Fprintln(stderr, "in the load generator counts), throughput in msg/s and MiB/s, and CPU seconds of the")
		fmt.Fprintln(stderr, "server processes (--server-pids) and of this process, as MiB/s per server core and")
		fmt.Fprintln(stderr, "server CPU seconds per GiB. A progress line goes to stderr every few seconds.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Workloads: bench/workloads/*.yaml. Kafka for it: localstack/kafka.sh up.")
		fmt.Fprintln(stderr, "Example:")
		fmt.Fprintln(stderr, "  sluice bench --driver kafka --brokers \"$(localstack/kafka.sh brokers)\" \\")
		fmt.Fprintln(stderr, "    --server-pids \"$(localstack/kafka.sh pids)\" --workload bench/workloads/s1.yaml --out /tmp/s1")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; see 'sluice bench -h'", fs.Args())
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"--driver", *driver}, {"--workload", *workloadPath}, {"--out", *out}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s required; see 'sluice bench -h'", strings.Join(missing, ", "))
	}

	w, err := loadgen.LoadWorkload(*workloadPath)
	if err != nil {
		return err
	}
	if *rate >= 0 {
		w.ProducerRate = *rate
	}
	if *recoveryRate > 0 {
		w.RecoveryRate = *recoveryRate
	}
	if *testDur > 0 {
		w.TestDuration = loadgen.Duration(*testDur)
	}
	if *warmupDur >= 0 {
		w.WarmupDuration = loadgen.Duration(*warmupDur)
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("workload %s with the overrides: %w", *workloadPath, err)
	}
	servers, err := loadgen.ParseServerPIDs(*serverPIDs)
	if err != nil {
		return err
	}
	if *pprofAddr != "" {
		stop, err := servePprof(*pprofAddr)
		if err != nil {
			return err
		}
		defer stop()
	}

	var drv loadgen.Driver
	switch *driver {
	case "kafka":
		if *brokers == "" {
			return errors.New("--brokers is required with --driver kafka (e.g. \"$(localstack/kafka.sh brokers)\")")
		}
		drv, err = kafkadriver.New(ctx, kafkadriver.Config{
			Brokers:           strings.Split(*brokers, ","),
			ReplicationFactor: *kafkaRF,
			TopicConfigs:      kafkaTopicConfigs.m,
			Linger:            *kafkaLinger,
			Compression:       *kafkaCompression,
		})
		if err != nil {
			return err
		}
	case "mem":
		drv = memdriver.New()
	case "sluice":
		drv, err = sluicedriver.New(sluicedriver.Config{Addr: *sluiceAddr, FetchAddr: *sluiceFetchAddr, PerRecord: *sluicePerRecord,
			SlowBatch: *sluiceSlowBatch, SlowLog: stderr})
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("--driver %q: must be kafka, sluice or mem", *driver)
	}
	defer func() { _ = drv.Close() }()

	fmt.Fprintf(stderr, "[bench] %s: workload %q (%s), %d topic(s) × %d partitions, %d B messages, %d producer(s), %d consumer(s)\n",
		drv.Name(), w.Name, *workloadPath, w.Topics, w.PartitionsPerTopic, w.MessageSize, w.Producers(), w.Consumers())
	start := time.Now()
	res, err := loadgen.Run(ctx, loadgen.Options{
		Driver: drv, Workload: w, Label: *label, Servers: servers,
		Progress: stderr, ProgressInterval: *progress, DrainTimeout: *drain, KeepTopics: *keepTopics,
	})
	if err != nil {
		return err
	}
	if err := loadgen.WriteFiles(*out, res); err != nil {
		return err
	}
	loadgen.WriteMarkdown(stdout, res)
	fmt.Fprintf(stderr, "[bench] done in %v; wrote %s/results.json and %s/results.md\n", time.Since(start).Round(time.Second), *out, *out)
	return nil
}

// kvFlag is a repeatable key=value flag.
type kvFlag struct{ m map[string]string }

func (f *kvFlag) String() string {
	var parts []string
	for k, v := range f.m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (f *kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = v
	return nil
}

// servePprof serves net/http/pprof on addr until stop is called (which
// waits for the server goroutine).
func servePprof(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // owned here: stop closes the server and waits
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
