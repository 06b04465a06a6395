package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/pkg/sluice"
)

// TxnTagHeader is the header `sluice copy --tag-transactions` puts on
// every record it writes: "TRANSACTIONAL-ID:EPOCH:N", the transaction that
// wrote it and how many records that transaction wrote (an audit can then
// tell a transaction seen whole from one seen in part).
const TxnTagHeader = "sluice.txn"

// copyFlags are `sluice copy`'s parsed arguments.
type copyFlags struct {
	ep               endpoint
	consumerAddr     string
	from, to         string
	group, tidPrefix string
	isolation        string
	tag              bool
	maxPoll          int
	sessionTimeout   time.Duration
	txnTimeout       time.Duration
	progress         time.Duration
	idle             time.Duration // 0: run until stopped
	hold             time.Duration // keep each transaction open after writing it
}

func newCopyCmd() *cobra.Command {
	var f copyFlags
	cmd := &cobra.Command{
		Use:   "copy FROM TO --group G --transactional-id PREFIX",
		Short: "copy a topic to another exactly once (consume-transform-produce in transactions)",
		Long: `Copies every record of topic FROM to topic TO, keeping keys, values and headers, as a
member of consumer group G: each batch of a partition's records is copied in one transaction
together with the group's offset (Consumer.RunTransactions), so a read_committed reader of TO
sees every record of FROM exactly once, however many copies run, die or restart. Records keep
their key's partition (murmur2), so TO keeps each key's order when it has FROM's partition
count. Runs until Ctrl-C (or SIGTERM), or with --idle until nothing was left to copy for that
long; progress goes to stderr.

Each input partition has a transactional producer of id PREFIX.G.FROM.PARTITION: a copy that
takes a partition over fences the previous one's. With --tag-transactions every record
written carries a header "` + TxnTagHeader + `" = "TRANSACTIONAL-ID:EPOCH:N" (N: the records of
that transaction), for audits.`,
		Example: `  sluice copy orders orders-mirror --group mirror --transactional-id mirror
  sluice copy orders orders-mirror --group mirror --transactional-id mirror --isolation read_committed`,
		Args: cobra.ExactArgs(2),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			f.ep.check(&c)
			if f.consumerAddr != "" {
				c.serverAddr("consumer-addr", f.consumerAddr)
			}
			c.required("group", f.group)
			c.required("transactional-id", f.tidPrefix)
			c.oneOf("isolation", f.isolation, "read_uncommitted", "read_committed")
			c.intIn("max-poll", f.maxPoll, 1, 10_000)
			c.positive("transaction-timeout", f.txnTimeout, 15*time.Minute)
			if f.hold < 0 || f.hold > time.Minute {
				c.badf("--hold %v: want 0..1m", f.hold)
			}
			if f.idle < 0 {
				c.badf("--idle %v: want 0 (run until stopped) or a positive duration", f.idle)
			}
			f.from, f.to = args[0], args[1]
			if f.from == f.to {
				c.badf("FROM and TO are the same topic %q", f.from)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCopy(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.ep.register(fs)
	fs.StringVar(&f.consumerAddr, "consumer-addr", "", "the fetch service's address when it is not --addr (split deployments)")
	fs.StringVar(&f.group, "group", "", "consumer group of the copies (required)")
	fs.StringVar(&f.tidPrefix, "transactional-id", "", "prefix of the transactional ids, one per input partition (required)")
	fs.StringVar(&f.isolation, "isolation", "read_uncommitted", "how FROM is read: read_uncommitted, or read_committed when transactions write it")
	fs.BoolVar(&f.tag, "tag-transactions", false, "put a "+TxnTagHeader+" header naming the transaction on every record written")
	fs.IntVar(&f.maxPoll, "max-poll", 500, "records a transaction takes at most, per partition")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 10*time.Second, "how long the group waits for a silent copy before its partitions move")
	fs.DurationVar(&f.txnTimeout, "transaction-timeout", time.Minute, "how long a transaction of a copy that died may stay open before the coordinator aborts it (a copy taking the partition over aborts it at once), 1ms..15m")
	fs.DurationVar(&f.hold, "hold", 0, "for failure tests: keep each transaction open this long after its records are written, before committing it, and say so on stderr (0: commit at once)")
	fs.DurationVar(&f.idle, "idle", 0, "stop once nothing was copied for this long (0: run until Ctrl-C): a one-off copy of what FROM holds")
	fs.DurationVar(&f.progress, "progress", 5*time.Second, "how often to print progress (0: never)")
	completeValues(cmd, "isolation", "read_uncommitted", "read_committed")
	return cmd
}

func runCopy(ctx context.Context, f copyFlags, stderr io.Writer) error {
	// What the SDK does about failures (sessions restarted, partitions
	// moved, transactions run again) is worth seeing on a long-running
	// copy.
	copts := []sluice.ClientOption{sluice.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))}
	if f.consumerAddr != "" {
		copts = append(copts, sluice.WithConsumerAddr(f.consumerAddr))
	}
	c, err := f.ep.client(copts...)
	if err != nil {
		return err
	}
	defer c.Close()
	k, err := c.NewConsumer(f.group, []string{f.from}, sluice.WithAutoCommit(0), sluice.WithCommitOnRevoke(false),
		sluice.WithReadCommitted(f.isolation == "read_committed"), sluice.WithMaxPollRecords(f.maxPoll),
		sluice.WithSessionTimeout(f.sessionTimeout), sluice.WithClientInfo("sluice copy"))
	if err != nil {
		return err
	}
	defer k.Close(context.WithoutCancel(ctx))
	var records, txns atomic.Int64
	var last atomic.Int64 // unix nanos of the last transaction (or the start)
	last.Store(time.Now().UnixNano())
	if f.idle > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			t := time.NewTicker(f.idle / 10)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if time.Since(time.Unix(0, last.Load())) >= f.idle {
						cancel()
						return
					}
				}
			}
		}()
	}
	if f.progress > 0 {
		go func() {
			t := time.NewTicker(f.progress)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fmt.Fprintf(stderr, "copied %d records in %d transactions\n", records.Load(), txns.Load())
				}
			}
		}()
	}
	err = k.RunTransactions(ctx, f.tidPrefix, func(ctx context.Context, tp sluice.TopicPartition, recs []sluice.ConsumedRecord, out *sluice.Txn) error {
		var tag []byte
		if f.tag {
			tid, epoch := out.ID()
			tag = []byte(tid + ":" + strconv.Itoa(int(epoch)) + ":" + strconv.Itoa(len(recs)))
		}
		for _, r := range recs {
			o := &sluice.Record{Topic: f.to, Partition: sluice.AnyPartition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
			for _, h := range r.Headers {
				o.Headers = append(o.Headers, sluice.Header{Key: h.Key, Value: h.Value})
			}
			if tag != nil {
				o.Headers = append(o.Headers, sluice.Header{Key: TxnTagHeader, Value: tag})
			}
			if err := out.Send(o); err != nil {
				return err
			}
		}
		if f.hold > 0 {
			// Written and not committed: a failure now leaves an open
			// transaction with records for the next owner to abort.
			if err := out.Flush(); err != nil {
				return err
			}
			// Announced, so a test can strike inside the window.
			tid, epoch := out.ID()
			fmt.Fprintf(stderr, "holding transaction %s:%d (%d records) for %v\n", tid, epoch, len(recs), f.hold)
			select {
			case <-time.After(f.hold):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		records.Add(int64(len(recs)))
		txns.Add(1)
		last.Store(time.Now().UnixNano())
		return nil
	}, sluice.WithTransactionTimeout(f.txnTimeout))
	fmt.Fprintf(stderr, "copied %d records in %d transactions\n", records.Load(), txns.Load())
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
