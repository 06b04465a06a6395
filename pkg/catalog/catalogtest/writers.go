package catalogtest

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runWriters(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"FreshPartition":             writersFreshPartition,
		"AcquireFree":                writersAcquireFree,
		"AcquireNeedsOwnHeartbeat":   writersAcquireNeedsOwnHeartbeat,
		"OwnedUntilExpiryThenStolen": writersOwnedThenStolen,
		"RemovedOwnerFreesAtOnce":    writersRemovedOwnerFreesAtOnce,
		"ReacquireBumpsEpoch":        writersReacquireBumpsEpoch,
		"Release":                    writersRelease,
		"AppendLedger":               writersAppendLedger,
		"AppendLedgerRejects":        writersAppendLedgerRejects,
		"TrimLedgers":                writersTrimLedgers,
		"ListPartitionsPaging":       writersListPartitionsPaging,
	})
}

func writersFreshPartition(e *env) {
	tp := e.topic("t", 3)
	p := e.partition("t", 2)
	want := catalog.Partition{Topic: "t", TopicID: tp.ID, Index: 2}
	if !partitionEqual(p, want) {
		e.t.Fatalf("fresh partition = %+v, want %+v", p, want)
	}
	_, err := e.b.GetPartition(e.ctx, "t", 3)
	wantErr(e.t, err, catalog.ErrNotFound, "GetPartition(3) of a 3-partition topic")
	_, err = e.b.GetPartition(e.ctx, "t", -1)
	wantInvalid(e.t, err, "partition", "GetPartition(-1)")
	_, err = e.b.GetPartition(e.ctx, "missing", 0)
	wantErr(e.t, err, catalog.ErrNotFound, "GetPartition of a missing topic")
}

func writersAcquireFree(e *env) {
	tp := e.topic("t", 2)
	e.heartbeat("ingest-a", 10*time.Second)
	p := e.acquire("t", 1, "ingest-a")
	want := catalog.Partition{Topic: "t", TopicID: tp.ID, Index: 1, Owner: "ingest-a", Epoch: 1, Version: 1}
	if !partitionEqual(p, want) {
		e.t.Fatalf("AcquireWriter = %+v, want %+v", p, want)
	}
	if got := e.partition("t", 1); !partitionEqual(got, want) {
		e.t.Fatalf("GetPartition after acquire = %+v, want %+v", got, want)
	}
	if got := e.partition("t", 0); got.Owner != "" || got.Epoch != 0 {
		e.t.Fatalf("acquiring partition 1 touched partition 0: %+v", got)
	}
	_, err := e.b.AcquireWriter(e.ctx, "t", 2, "ingest-a")
	wantErr(e.t, err, catalog.ErrNotFound, "AcquireWriter beyond the partition count")
	_, err = e.b.AcquireWriter(e.ctx, "t", 0, "bad owner")
	wantInvalid(e.t, err, "owner", "AcquireWriter with a bad owner id")
}

func writersAcquireNeedsOwnHeartbeat(e *env) {
	e.topic("t", 1)
	_, err := e.b.AcquireWriter(e.ctx, "t", 0, "ingest-a")
	wantErr(e.t, err, catalog.ErrOwnerExpired, "AcquireWriter without a heartbeat")
	e.heartbeat("ingest-a", time.Second)
	e.clk.Advance(time.Second)
	_, err = e.b.AcquireWriter(e.ctx, "t", 0, "ingest-a")
	wantErr(e.t, err, catalog.ErrOwnerExpired, "AcquireWriter with an expired heartbeat")
	if p := e.partition("t", 0); p.Owner != "" || p.Epoch != 0 {
		e.t.Fatalf("refused acquire changed the partition: %+v", p)
	}
}

func writersOwnedThenStolen(e *env) {
	e.topic("t", 1)
	e.heartbeat("ingest-a", 10*time.Second)
	e.heartbeat("ingest-b", 10*time.Second)
	a := e.acquire("t", 0, "ingest-a").Lease()
	ledger := e.ledgerFor(a, 0)

	_, err := e.b.AcquireWriter(e.ctx, "t", 0, "ingest-b")
	wantErr(e.t, err, catalog.ErrOwned, "AcquireWriter of a partition with a live owner")

	// Just before expiry a still owns it; at expiry it is free.
	e.clk.Advance(10*time.Second - time.Millisecond)
	e.heartbeat("ingest-b", 10*time.Second)
	_, err = e.b.AcquireWriter(e.ctx, "t", 0, "ingest-b")
	wantErr(e.t, err, catalog.ErrOwned, "AcquireWriter a millisecond before the owner expires")
	e.clk.Advance(time.Millisecond)
	p := e.acquire("t", 0, "ingest-b")
	if p.Owner != "ingest-b" || p.Epoch != 2 {
		e.t.Fatalf("steal = %+v, want owner ingest-b at epoch 2", p)
	}

	// The old writer is fenced everywhere, even after it heartbeats again.
	e.heartbeat("ingest-a", 10*time.Second)
	_, err = e.b.AppendLedger(e.ctx, a, catalog.LedgerRef{ID: ledger.ID, FirstOffset: 0})
	wantErr(e.t, err, catalog.ErrFenced, "AppendLedger with the stolen lease")
	wantErr(e.t, e.b.ReleaseWriter(e.ctx, a), catalog.ErrFenced, "ReleaseWriter with the stolen lease")
	_, err = e.b.AcquireWriter(e.ctx, "t", 0, "ingest-a")
	wantErr(e.t, err, catalog.ErrOwned, "AcquireWriter back while the thief is live")
	if got := e.partition("t", 0); got.Owner != "ingest-b" || got.Epoch != 2 || len(got.Ledgers) != 0 {
		e.t.Fatalf("fenced calls changed the partition: %+v", got)
	}
}

func writersRemovedOwnerFreesAtOnce(e *env) {
	e.topic("t", 2)
	e.heartbeat("ingest-a", time.Minute)
	e.heartbeat("ingest-b", time.Minute)
	e.acquire("t", 0, "ingest-a")
	e.acquire("t", 1, "ingest-a")
	if err := e.b.RemoveOwner(e.ctx, "ingest-a"); err != nil {
		e.t.Fatal(err)
	}
	for i := range 2 {
		if p := e.acquire("t", i, "ingest-b"); p.Epoch != 2 {
			e.t.Fatalf("takeover of partition %d = %+v, want epoch 2", i, p)
		}
	}
}

func writersReacquireBumpsEpoch(e *env) {
	e.topic("t", 1)
	e.heartbeat("ingest-a", time.Minute)
	first := e.acquire("t", 0, "ingest-a").Lease()
	second := e.acquire("t", 0, "ingest-a")
	if second.Epoch != first.Epoch+1 || second.Owner != "ingest-a" {
		e.t.Fatalf("re-acquire = %+v, want epoch %d", second, first.Epoch+1)
	}
	ledger := e.ledgerFor(first, 0)
	_, err := e.b.AppendLedger(e.ctx, first, catalog.LedgerRef{ID: ledger.ID})
	wantErr(e.t, err, catalog.ErrFenced, "AppendLedger with the previous session's lease")
	if _, err := e.b.AppendLedger(e.ctx, second.Lease(), catalog.LedgerRef{ID: ledger.ID}); err != nil {
		e.t.Fatalf("AppendLedger with the current lease: %v", err)
	}
}

func writersRelease(e *env) {
	e.topic("t", 1)
	e.heartbeat("ingest-a", time.Minute)
	e.heartbeat("ingest-b", time.Minute)
	lease := e.acquire("t", 0, "ingest-a").Lease()
	if err := e.b.ReleaseWriter(e.ctx, lease); err != nil {
		e.t.Fatalf("ReleaseWriter: %v", err)
	}
	if p := e.partition("t", 0); p.Owner != "" || p.Epoch != 1 || p.Version != 2 {
		e.t.Fatalf("released partition = %+v, want no owner, epoch 1, version 2", p)
	}
	wantErr(e.t, e.b.ReleaseWriter(e.ctx, lease), catalog.ErrFenced, "ReleaseWriter twice")
	if p := e.acquire("t", 0, "ingest-b"); p.Epoch != 2 {
		e.t.Fatalf("acquire after release = %+v, want epoch 2", p)
	}
	bad := lease
	bad.Epoch = 0
	wantInvalid(e.t, e.b.ReleaseWriter(e.ctx, bad), "epoch", "ReleaseWriter with epoch 0")
}

func writersAppendLedger(e *env) {
	e.topic("t", 1)
	e.heartbeat("ingest-a", time.Minute)
	p := e.acquire("t", 0, "ingest-a")
	lease := p.Lease()
	l1 := e.ledgerFor(lease, 0)
	l2 := e.ledgerFor(lease, 100)
	l3 := e.ledgerFor(lease, 100) // an empty l2 leaves l3 at the same offset
	var want []catalog.LedgerRef
	for _, l := range []catalog.LedgerMetadata{l1, l2, l3} {
		ref := catalog.LedgerRef{ID: l.ID, FirstOffset: l.FirstOffset}
		got, err := e.b.AppendLedger(e.ctx, lease, ref)
		if err != nil {
			e.t.Fatalf("AppendLedger(%+v): %v", ref, err)
		}
		want = append(want, ref)
		p.Ledgers, p.Version = want, p.Version+1
		if !partitionEqual(got, p) {
			e.t.Fatalf("AppendLedger = %+v, want %+v", got, p)
		}
	}
	if got := e.partition("t", 0); !partitionEqual(got, p) {
		e.t.Fatalf("GetPartition = %+v, want %+v", got, p)
	}
}

func writersAppendLedgerRejects(e *env) {
	e.topic("t", 2)
	e.heartbeat("ingest-a", time.Minute)
	lease := e.acquire("t", 0, "ingest-a").Lease()
	other := e.acquire("t", 1, "ingest-a").Lease()
	l1 := e.ledgerFor(lease, 10)
	l2 := e.ledgerFor(lease, 5)
	ofOther := e.ledgerFor(other, 10)
	if _, err := e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: l1.ID, FirstOffset: 10}); err != nil {
		e.t.Fatal(err)
	}
	cases := []struct {
		ref   catalog.LedgerRef
		field string
		what  string
	}{
		{catalog.LedgerRef{ID: l1.ID, FirstOffset: 10}, "ref", "the tail ledger again"},
		{catalog.LedgerRef{ID: l2.ID, FirstOffset: 5}, "ref", "an offset before the tail's"},
		{catalog.LedgerRef{ID: l2.ID, FirstOffset: 10}, "ref", "an offset the ledger does not start at"},
		{catalog.LedgerRef{ID: ofOther.ID, FirstOffset: 10}, "ref", "another partition's ledger"},
	}
	for _, c := range cases {
		_, err := e.b.AppendLedger(e.ctx, lease, c.ref)
		wantInvalid(e.t, err, c.field, "AppendLedger of "+c.what)
	}
	_, err := e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: ofOther.ID + 1000, FirstOffset: 10})
	wantErr(e.t, err, catalog.ErrNotFound, "AppendLedger of a ledger that does not exist")
	if p := e.partition("t", 0); len(p.Ledgers) != 1 || p.Ledgers[0].ID != l1.ID {
		e.t.Fatalf("refused appends changed the chain: %+v", p.Ledgers)
	}
}

func writersTrimLedgers(e *env) {
	tp := e.topic("t", 1)
	e.heartbeat("ingest-a", time.Minute)
	lease := e.acquire("t", 0, "ingest-a").Lease()
	var ls []catalog.LedgerMetadata
	for _, first := range []int64{0, 100, 250} {
		l := e.ledgerFor(lease, first)
		if _, err := e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: l.ID, FirstOffset: first}); err != nil {
			e.t.Fatal(err)
		}
		ls = append(ls, l)
	}
	p := e.partition("t", 0)

	_, err := e.b.TrimLedgers(e.ctx, tp.ID, 0, ls[1].ID, p.Version-1)
	wantErr(e.t, err, catalog.ErrVersionConflict, "TrimLedgers with a stale version")
	_, err = e.b.TrimLedgers(e.ctx, tp.ID, 0, ls[2].ID, p.Version)
	wantInvalid(e.t, err, "through", "TrimLedgers of the tail")
	_, err = e.b.TrimLedgers(e.ctx, tp.ID, 0, ls[2].ID+1, p.Version)
	wantInvalid(e.t, err, "through", "TrimLedgers of a ledger not in the chain")
	_, err = e.b.TrimLedgers(e.ctx, "0123456789abcdef", 0, ls[0].ID, p.Version)
	wantErr(e.t, err, catalog.ErrNotFound, "TrimLedgers of an unknown topic id")

	trimmed, err := e.b.TrimLedgers(e.ctx, tp.ID, 0, ls[1].ID, p.Version)
	if err != nil {
		e.t.Fatalf("TrimLedgers: %v", err)
	}
	want := p
	want.Ledgers = []catalog.LedgerRef{{ID: ls[2].ID, FirstOffset: 250}}
	want.LogStartOffset = 250
	want.Version++
	if !partitionEqual(trimmed, want) || !partitionEqual(e.partition("t", 0), want) {
		e.t.Fatalf("TrimLedgers = %+v, want %+v", trimmed, want)
	}

	// The writer is unaffected: its epoch, not the version, fences it.
	l4 := e.ledgerFor(lease, 400)
	if _, err := e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: l4.ID, FirstOffset: 400}); err != nil {
		e.t.Fatalf("AppendLedger after a trim: %v", err)
	}
}

func writersListPartitionsPaging(e *env) {
	tp := e.topic("t", 7)
	e.heartbeat("ingest-a", time.Minute)
	e.acquire("t", 3, "ingest-a")
	var got []catalog.Partition
	token, pages := "", 0
	for {
		page, err := e.b.ListPartitions(e.ctx, "t", token, 3)
		if err != nil {
			e.t.Fatalf("ListPartitions: %v", err)
		}
		pages++
		got = append(got, page.Items...)
		if token = page.NextPageToken; token == "" || pages > 5 {
			break
		}
	}
	if len(got) != 7 || pages != 3 {
		e.t.Fatalf("ListPartitions gave %d partitions in %d pages, want 7 in 3", len(got), pages)
	}
	for i, p := range got {
		want := catalog.Partition{Topic: "t", TopicID: tp.ID, Index: i}
		if i == 3 {
			want.Owner, want.Epoch, want.Version = "ingest-a", 1, 1
		}
		if !partitionEqual(p, want) {
			e.t.Fatalf("partition %d = %+v, want %+v", i, p, want)
		}
	}
	_, err := e.b.ListPartitions(e.ctx, "t", "!!", 3)
	wantInvalid(e.t, err, "pageToken", "ListPartitions with a bad token")
	_, err = e.b.ListPartitions(e.ctx, "missing", "", 3)
	wantErr(e.t, err, catalog.ErrNotFound, "ListPartitions of a missing topic")
}

func partitionEqual(a, b catalog.Partition) bool {
	return a.Topic == b.Topic && a.TopicID == b.TopicID && a.Index == b.Index && a.Owner == b.Owner &&
		a.Epoch == b.Epoch && slices.Equal(a.Ledgers, b.Ledgers) && a.LogStartOffset == b.LogStartOffset && a.Version == b.Version
}
