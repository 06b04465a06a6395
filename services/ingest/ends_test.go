package ingest

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/admin"
)

// DescribeTopic's end offset on the copy that writes the partition
// (EndOffset) is a high watermark (docs/DESIGN.md §4.1): it counts only
// acknowledged records, and it never moves back, also not when a failed
// ledger's recovery ends that ledger before batches it had accepted.
func TestDescribedEndIsAcknowledgedAndNeverMovesBack(t *testing.T) {
	f := newFixture(t, 1)
	a := f.copyOf("a", nil)
	ad, err := admin.New(admin.Deps{Catalog: f.cat, Ledgers: f.ledgers, EndOffset: a.EndOffset})
	if err != nil {
		t.Fatal(err)
	}
	var acked, last int64 // records acknowledged; the end described last
	describe := func(when string) {
		t.Helper()
		resp, err := ad.DescribeTopic(context.Background(), connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: f.topic.Name}))
		if err != nil {
			t.Fatal(err)
		}
		end := resp.Msg.GetTopic().GetPartitions()[0].GetEndOffset()
		if end > acked || end < last {
			t.Fatalf("%s: end offset %d; want it within [%d, %d] (the last one described, the records acknowledged)", when, end, last, acked)
		}
		last = end
	}
	produce := func() {
		t.Helper()
		if _, err := f.produce(a, 0); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	for range 3 {
		produce()
	}
	describe("3 records acknowledged")

	// Two produces accepted while the bookies do not answer, then the
	// ledger fails: its recovery keeps the acknowledged entries only.
	f.ledgers.setHold(true)
	w := writerOf(a, f.topic.ID, 0)
	failed := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := f.produce(a, 0)
			failed <- err
		}()
	}
	eventually(t, "two produces accepted", func() bool { return w.NextOffset() == 5 })
	describe("2 records accepted, not acknowledged")
	f.ledgers.fail(f.ledgers.tail())
	for range 2 {
		if err := <-failed; connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("a produce whose ledger failed: %v; want UNAVAILABLE", err)
		}
	}
	describe("the ledger failed")
	eventually(t, "the writer replaced its ledger", func() bool { return w.NextOffset() == 3 })
	describe("the ledger was recovered")
	// The next ledger opens after the recovery decided the end: until
	// then a produce is refused (UNAVAILABLE), not accepted.
	eventually(t, "a produce after the recovery", func() bool {
		_, err := f.produce(a, 0)
		if err != nil && connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("a produce after the recovery: %v", err)
		}
		return err == nil
	})
	acked++
	describe("a record acknowledged after the recovery")
}
