package history_test

import (
	"fmt"
	"os"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

func ExampleRecorder() {
	var now time.Duration // a fake clock, for a stable output
	rec, err := history.NewRecorder(os.Stdout, history.Config{
		Scenario: "example", Seed: 7,
		Start: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Clock: func() time.Duration { return now },
	})
	if err != nil {
		panic(err)
	}
	now = 1000
	invoke := rec.Now() // just before sending the produce
	now = 2500          // the answer arrives
	err = rec.Record(history.Op{
		Kind: history.Produce, Invoke: invoke, Producer: "p1",
		Idempotence: &history.Idempotence{ProducerID: 7, Sequence: 0},
		Topic:       "orders", Partition: 3, Offset: 41, Value: "p1-0", Outcome: history.OK,
	})
	if err != nil {
		panic(err) // the run must fail: a history with a hole proves nothing
	}
	now = 3000
	if err := rec.Record(history.Op{Kind: history.Consume, Group: "g", Member: "c1", LeaseEpoch: 2,
		Topic: "orders", Partition: 3, Offset: 41, Value: "p1-0"}); err != nil {
		panic(err)
	}
	if err := rec.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"format":"sluice-history","version":2,"start":"2026-12-01T10:00:00Z","scenario":"example","seed":7}
	// {"op":"produce","time":2500,"invoke":1000,"producer":"p1","producer_id":7,"producer_epoch":0,"sequence":0,"topic":"orders","partition":3,"offset":41,"value":"p1-0","outcome":"ok"}
	// {"op":"consume","time":3000,"topic":"orders","partition":3,"offset":41,"value":"p1-0","group":"g","member":"c1","lease_epoch":2}
}
