package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/kafkadriver"
	"github.com/sluicemq/sluice/harness/loadgen/memdriver"
	"github.com/sluicemq/sluice/harness/loadgen/sluicedriver"
	"github.com/sluicemq/sluice/internal/tlsconf"
)

// benchFlags are `sluice bench`'s flags.
type benchFlags struct {
	driver                      string
	brokers                     string
	sluiceAddr, sluiceFetchAddr string
	pprofAddr                   string
	sluiceSlowBatch             time.Duration
	sluicePerRecord             bool
	sluiceSchema                string
	sluiceTLSCA, sluiceToken    string
	workload, out, label        string
	serverPIDs                  string
	rate, recoveryRate          float64
	testDur, warmupDur          time.Duration
	progress, drain             time.Duration
	keepTopics                  bool
	kafkaRF                     int
	kafkaLinger                 time.Duration
	kafkaCompression            string
	kafkaTopicConfigs           kvFlag

	// By check: the parsed --server-pids, the client TLS configuration of
	// --sluice-tls-ca (nil: cleartext), and which overrides were given.
	servers                                     []loadgen.ServerProcess
	sluiceTLS                                   *tls.Config
	setRate, setRecovery, setTestDur, setWarmup bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench --driver kafka|sluice|mem --workload FILE --out DIR",
		Short: "run a benchmark workload against Kafka, Sluice or an in-process loopback; 'sluice bench ledger' benchmarks the ledger tier",
		Long: `Runs one OpenMessaging-Benchmark-shaped workload against a messaging system and writes
results.json and results.md to DIR: publish and end-to-end latency (p50/p99/p99.9/max,
measured from each message's intended send time, so queueing in the load generator
counts), throughput in msg/s and MiB/s, and CPU seconds of the server processes
(--server-pids) and of this process, as MiB/s per server core and server CPU seconds
per GiB. A progress line goes to stderr every --progress.

Drivers: kafka (--brokers), sluice (sluice dev, or ingest and fetch copies:
--sluice-addr, --sluice-fetch-addr) and mem (an in-process loopback that measures the
load generator itself). Flags of another driver are ignored, so one set of flags
serves every driver (bench/compare.sh's BENCH_ARGS). Workloads: bench/workloads/*.yaml;
Kafka for them: localstack/kafka.sh up.`,
		Example: `  sluice bench --driver kafka --brokers "$(localstack/kafka.sh brokers)" \
    --server-pids "$(localstack/kafka.sh pids)" --workload bench/workloads/s1.yaml --out /tmp/s1
  sluice bench --driver sluice --sluice-addr 127.0.0.1:7420 --server-pids "dev=$DEV_PID" \
    --workload bench/workloads/s1.yaml --out /tmp/s1-sluice`,
		Args:    noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return f.check(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.driver, "driver", "", "system to load: kafka, sluice (sluice dev or ingest/fetch copies behind one address), or mem (in-process loopback: measures the load generator itself) (required)")
	fs.StringVar(&f.brokers, "brokers", "", "kafka: bootstrap brokers, host:port,host:port,... (required for kafka)")
	fs.StringVar(&f.sluiceAddr, "sluice-addr", devDefaultAddr, "sluice: sluice dev's address, or an ingest copy's (ProducerService and the topic admin RPCs)")
	fs.StringVar(&f.sluiceFetchAddr, "sluice-fetch-addr", "", "sluice: a fetch copy's address for the consumers (default --sluice-addr)")
	fs.StringVar(&f.pprofAddr, "pprof", "", "serve the load generator's own /debug/pprof/ (profiles, execution traces) on this address, e.g. 127.0.0.1:17520")
	fs.DurationVar(&f.sluiceSlowBatch, "sluice-slow-batch", 0, "sluice: log produce batches acknowledged later than this after their first record (at most one line a second), with when they were sent (0: off)")
	fs.BoolVar(&f.sluicePerRecord, "sluice-per-record", false, "sluice: consumers ask for one message per record (as browsers do) instead of the stored record batches")
	fs.StringVar(&f.sluiceSchema, "sluice-schema", "", "sluice: \"avro\" validates every value at produce: registers an Avro schema under <topic>-value, creates the topics with schema.subject, and sends each value as one datum of it in Confluent's wire format, the message size in total (default: no schema)")
	fs.StringVar(&f.sluiceTLSCA, "sluice-tls-ca", "", "sluice: CA certificates (PEM) that sign the server's certificate: every client connects over TLS (https; a HOST:PORT address is https) (default: cleartext HTTP/2)")
	fs.StringVar(&f.sluiceToken, "sluice-token", "", "sluice: bearer token (a JWT) sent on every call, producers', consumers' and admin's, for a server with --auth required; only over TLS or to loopback (default: none)")
	fs.StringVar(&f.workload, "workload", "", "workload YAML file, e.g. bench/workloads/s1.yaml (required)")
	fs.StringVar(&f.out, "out", "", "directory for results.json and results.md (created; required)")
	fs.StringVar(&f.label, "label", "", "name of this run in the tables (default \"<driver> <workload name>\")")
	fs.StringVar(&f.serverPIDs, "server-pids", "", "server processes to charge CPU to: pid,pid,... or name=pid,...\n(e.g. \"$(localstack/kafka.sh pids)\"); without them no CPU cost is reported")
	fs.Float64Var(&f.rate, "rate", 0, fmt.Sprintf("override the workload's producerRate, messages/s, 0..%d (0: search for the maximum; default: the workload's)", loadgen.MaxProducerRate))
	fs.Float64Var(&f.recoveryRate, "recovery-rate", 0, fmt.Sprintf("override the workload's recoveryRate, messages/s, 1..%d (workloads with a recovery phase; default: the workload's)", loadgen.MaxProducerRate))
	fs.DurationVar(&f.testDur, "test-duration", 0, fmt.Sprintf("override the workload's test duration, 1s..%v (default: the workload's)", loadgen.MaxTestDuration))
	fs.DurationVar(&f.warmupDur, "warmup-duration", 0, fmt.Sprintf("override the workload's warm-up duration, 0..%v (default: the workload's)", loadgen.MaxWarmupDuration))
	fs.DurationVar(&f.progress, "progress", loadgen.DefaultProgressInterval, "interval of progress lines on stderr")
	fs.DurationVar(&f.drain, "drain-timeout", loadgen.DefaultDrainTimeout, "how long after the window to wait for outstanding sends, acks and deliveries")
	fs.BoolVar(&f.keepTopics, "keep-topics", false, "leave the benchmark's topics in place (default: delete them)")
	fs.IntVar(&f.kafkaRF, "kafka-replication-factor", kafkadriver.DefaultReplicationFactor, "kafka: replication factor of the topics (1..16)")
	fs.DurationVar(&f.kafkaLinger, "kafka-linger", kafkadriver.DefaultLinger, "kafka: producer linger (0..1s)")
	fs.StringVar(&f.kafkaCompression, "kafka-compression", "none", "kafka: producer compression: none, gzip, snappy, lz4, zstd")
	fs.Var(&f.kafkaTopicConfigs, "kafka-topic-config", "kafka: topic config key=value, repeatable (e.g. flush.messages=1)")
	completeValues(cmd, "driver", "kafka", "sluice", "mem")
	completeValues(cmd, "kafka-compression", "none", "gzip", "snappy", "lz4", "zstd")
	cmd.AddCommand(newBenchLedgerCmd())
	return cmd
}

// check checks the flags, every driver's: one set of flags may serve all.
func (f *benchFlags) check(fs *pflag.FlagSet) error {
	var c flagCheck
	var missing []string
	for _, r := range []struct{ name, v string }{{"--driver", f.driver}, {"--workload", f.workload}, {"--out", f.out}} {
		if r.v == "" {
			missing = append(missing, r.name)
		}
	}
	if len(missing) > 0 {
		c.badf("%s required", strings.Join(missing, ", "))
	}
	if f.driver != "" {
		c.oneOf("driver", f.driver, "kafka", "sluice", "mem")
	}
	if f.driver == "kafka" && f.brokers == "" {
		c.badf("--brokers is required with --driver kafka (e.g. \"$(localstack/kafka.sh brokers)\")")
	}
	if f.brokers != "" {
		if err := (kafkadriver.Config{Brokers: strings.Split(f.brokers, ",")}).Validate(); err != nil {
			c.badf("--brokers %q: %v", f.brokers, err)
		}
	}
	c.serverAddr("sluice-addr", f.sluiceAddr)
	if f.sluiceFetchAddr != "" {
		c.serverAddr("sluice-fetch-addr", f.sluiceFetchAddr)
	}
	if f.pprofAddr != "" {
		c.listenAddr("pprof", f.pprofAddr)
	}
	if f.sluiceSchema != "" {
		c.oneOf("sluice-schema", f.sluiceSchema, sluicedriver.SchemaAvro)
	}
	f.sluiceTLS = nil
	if f.sluiceTLSCA != "" {
		cfg, err := tlsconf.Client{CAFile: f.sluiceTLSCA}.Config()
		if err != nil {
			c.badf("--sluice-tls-ca: %v", err)
		} else {
			f.sluiceTLS = cfg
		}
	}
	if f.sluiceTLS != nil || f.sluiceToken != "" {
		// What the driver will check at its start, reported with the
		// other flags: the token's transport, cleartext addresses.
		if err := f.sluiceConfig().Validate(); err != nil {
			c.badf("--sluice-tls-ca/--sluice-token: %v", err)
		}
	}
	if f.sluiceSlowBatch < 0 {
		c.badf("--sluice-slow-batch %v: want 0 (off) or a positive duration", f.sluiceSlowBatch)
	}
	var err error
	if f.servers, err = loadgen.ParseServerPIDs(f.serverPIDs); err != nil {
		c.badf("--server-pids: %v", err)
	}
	f.setRate, f.setRecovery = fs.Changed("rate"), fs.Changed("recovery-rate")
	f.setTestDur, f.setWarmup = fs.Changed("test-duration"), fs.Changed("warmup-duration")
	if f.setRate {
		c.rate("rate", f.rate, 0, loadgen.MaxProducerRate, fmt.Sprintf("0 (search for the maximum) or up to %d messages/s", loadgen.MaxProducerRate))
	}
	if f.setRecovery {
		c.rate("recovery-rate", f.recoveryRate, 1, loadgen.MaxProducerRate, fmt.Sprintf("1..%d messages/s", loadgen.MaxProducerRate))
	}
	if f.setTestDur && (f.testDur < time.Second || f.testDur > loadgen.MaxTestDuration) {
		c.badf("--test-duration %v: want 1s..%v", f.testDur, loadgen.MaxTestDuration)
	}
	if f.setWarmup && (f.warmupDur < 0 || f.warmupDur > loadgen.MaxWarmupDuration) {
		c.badf("--warmup-duration %v: want 0..%v", f.warmupDur, loadgen.MaxWarmupDuration)
	}
	c.positive("progress", f.progress, 0)
	c.positive("drain-timeout", f.drain, 0)
	c.intIn("kafka-replication-factor", f.kafkaRF, 1, 16)
	if f.kafkaLinger < 0 || f.kafkaLinger > time.Second {
		c.badf("--kafka-linger %v: want 0..1s", f.kafkaLinger)
	}
	c.oneOf("kafka-compression", f.kafkaCompression, "none", "gzip", "snappy", "lz4", "zstd")
	return c.err()
}

func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	w, err := loadgen.LoadWorkload(f.workload)
	if err != nil {
		return err
	}
	if f.setRate {
		w.ProducerRate = f.rate
	}
	if f.setRecovery {
		w.RecoveryRate = f.recoveryRate
	}
	if f.setTestDur {
		w.TestDuration = loadgen.Duration(f.testDur)
	}
	if f.setWarmup {
		w.WarmupDuration = loadgen.Duration(f.warmupDur)
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("workload %s with the overrides: %w", f.workload, err)
	}
	if f.driver == "sluice" && f.sluiceSchema != "" && w.MessageSize < sluicedriver.MinSchemaMessageSize {
		return fmt.Errorf("workload %s: messageSize %d is too small for --sluice-schema %s (at least %d bytes: the frame, the length and the load generator's header)",
			f.workload, w.MessageSize, f.sluiceSchema, sluicedriver.MinSchemaMessageSize)
	}
	if f.pprofAddr != "" {
		stop, err := servePprof(f.pprofAddr)
		if err != nil {
			return err
		}
		defer stop()
	}

	var drv loadgen.Driver
	switch f.driver {
	case "kafka":
		drv, err = kafkadriver.New(ctx, kafkadriver.Config{
			Brokers:           strings.Split(f.brokers, ","),
			ReplicationFactor: f.kafkaRF,
			TopicConfigs:      f.kafkaTopicConfigs.m,
			Linger:            f.kafkaLinger,
			Compression:       f.kafkaCompression,
		})
		if err != nil {
			return err
		}
	case "mem":
		drv = memdriver.New()
	case "sluice":
		cfg := f.sluiceConfig()
		cfg.SlowLog = stderr
		drv, err = sluicedriver.New(cfg)
		if err != nil {
			return err
		}
	default:
		panic("driver not checked: " + f.driver) // check allows only the three
	}
	defer func() { _ = drv.Close() }()

	fmt.Fprintf(stderr, "[bench] %s: workload %q (%s), %d topic(s) × %d partitions, %d B messages, %d producer(s), %d consumer(s)\n",
		drv.Name(), w.Name, f.workload, w.Topics, w.PartitionsPerTopic, w.MessageSize, w.Producers(), w.Consumers())
	start := time.Now()
	res, err := loadgen.Run(ctx, loadgen.Options{
		Driver: drv, Workload: w, Label: f.label, Servers: f.servers,
		Progress: stderr, ProgressInterval: f.progress, DrainTimeout: f.drain, KeepTopics: f.keepTopics,
	})
	if err != nil {
		return err
	}
	if err := loadgen.WriteFiles(f.out, res); err != nil {
		return err
	}
	loadgen.WriteMarkdown(stdout, res)
	fmt.Fprintf(stderr, "[bench] done in %v; wrote %s/results.json and %s/results.md\n", time.Since(start).Round(time.Second), f.out, f.out)
	return nil
}

// sluiceConfig is the Sluice driver's configuration from the flags (after
// check, which loads --sluice-tls-ca). SlowLog is the caller's.
func (f *benchFlags) sluiceConfig() sluicedriver.Config {
	return sluicedriver.Config{Addr: f.sluiceAddr, FetchAddr: f.sluiceFetchAddr, PerRecord: f.sluicePerRecord,
		Schema: f.sluiceSchema, SlowBatch: f.sluiceSlowBatch, TLS: f.sluiceTLS, Token: f.sluiceToken}
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
