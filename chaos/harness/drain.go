package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/chaos/history"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// maxDrainCalls bounds the Fetch calls of one partition's drain.
const maxDrainCalls = 100_000

// drainStall is how long a partition's drain may make no progress before
// it is stuck.
const drainStall = 30 * time.Second

// Drain reads every partition of topic from offset 0 to its end with
// unary Fetch calls (member "drainer", no group), records each record and
// then the partition's drain op. Run it after the faults healed and the
// producers stopped: the end it drains to is the high watermark it sees
// once it caught up. A partition that cannot be read within `within`, or
// that makes no progress for drainStall, is stuck: its drain op records
// the offset it could not read past and the error (an incomplete drain:
// acknowledged records at or above it are unreadable, which the checker
// counts as lost), and Drain returns an error.
func Drain(ctx context.Context, api sluicev1connect.ConsumerServiceClient, rec *history.Recorder, topic string, partitions int32, within time.Duration) error {
	deadline := time.Now().Add(within)
	for p := int32(0); p < partitions; p++ {
		next := int64(0)
		var lastErr error
		progress := time.Now()
		for calls := 0; ; calls++ {
			if calls >= maxDrainCalls || time.Now().After(deadline) || time.Since(progress) > drainStall {
				err := fmt.Errorf("drain %s/%d: stuck at offset %d after %d calls (last error: %v)", topic, p, next, calls, lastErr)
				if rerr := rec.Record(history.Op{Kind: history.Drain, Topic: topic, Partition: p, Offset: next, Member: "drainer", Error: err.Error()}); rerr != nil {
					return errors.Join(err, rerr)
				}
				return err
			}
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := api.Fetch(fctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Partition: p, Offset: next, MaxRecords: 1000}))
			cancel()
			if err != nil {
				lastErr = err
				if !sleepOr(ctx, nil, 200*time.Millisecond) {
					return ctx.Err()
				}
				continue
			}
			for _, r := range resp.Msg.GetRecords() {
				if err := rec.Record(history.Op{Kind: history.Consume, Topic: topic, Partition: p, Offset: r.GetOffset(), Value: string(r.GetValue()), Member: "drainer"}); err != nil {
					return err
				}
				next = r.GetOffset() + 1
				progress = time.Now()
			}
			if n := resp.Msg.GetNextOffset(); n > next {
				next = n
				progress = time.Now()
			}
			if hw := resp.Msg.GetHighWatermark(); len(resp.Msg.GetRecords()) == 0 && next >= hw {
				if err := rec.Record(history.Op{Kind: history.Drain, Topic: topic, Partition: p, Offset: hw, Member: "drainer"}); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}
