package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/catalogtest"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

// populate writes one of everything and returns what it wrote.
func populate(t *testing.T, c *catalog.Catalog) (catalog.Topic, catalog.Partition, catalog.LedgerMetadata) {
	t.Helper()
	ctx := context.Background()
	tp, err := c.CreateTopic(ctx, "orders", 2, catalog.DefaultTopicConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeartbeatOwner(ctx, "ingest-a", "127.0.0.1:7420", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeartbeatBookie(ctx, catalog.Bookie{ID: "bookie-1", Address: "127.0.0.1:3181", FreeBytes: 1, TotalBytes: 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := c.AcquireWriter(ctx, "orders", 1, "ingest-a")
	if err != nil {
		t.Fatal(err)
	}
	l := p.Lease()
	m, err := c.CreateLedger(ctx, catalog.LedgerSpec{Topic: l.Topic, TopicID: l.TopicID, Partition: l.Partition,
		Replication: catalog.DefaultReplication, Ensemble: []string{"b1:1", "b2:1", "b3:1"}, WriterOwner: l.Owner, WriterEpoch: l.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = c.AppendLedger(ctx, l, catalog.LedgerRef{ID: m.ID}); err != nil {
		t.Fatal(err)
	}
	return tp, p, m
}

// verify checks that c holds what populate wrote, and that the ledger id
// counter continues past it.
func verify(t *testing.T, c *catalog.Catalog, tp catalog.Topic, p catalog.Partition, m catalog.LedgerMetadata) {
	t.Helper()
	ctx := context.Background()
	gotT, err := c.GetTopic(ctx, "orders")
	if err != nil || gotT.ID != tp.ID || gotT.Version != tp.Version || gotT.Config != tp.Config {
		t.Fatalf("topic after reopen = %+v, %v; want %+v", gotT, err, tp)
	}
	gotP, err := c.GetPartition(ctx, "orders", 1)
	if err != nil || gotP.Owner != p.Owner || gotP.Epoch != p.Epoch || len(gotP.Ledgers) != 1 || gotP.Version != p.Version {
		t.Fatalf("partition after reopen = %+v, %v; want %+v", gotP, err, p)
	}
	gotM, err := c.GetLedger(ctx, m.ID)
	if err != nil || gotM.Version != m.Version || gotM.State != m.State || !gotM.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("ledger after reopen = %+v, %v; want %+v", gotM, err, m)
	}
	if o, err := c.GetOwner(ctx, "ingest-a"); err != nil || o.Address != "127.0.0.1:7420" {
		t.Fatalf("owner after reopen = %+v, %v", o, err)
	}
	if bs, err := c.ListLiveBookies(ctx); err != nil || len(bs) != 1 {
		t.Fatalf("bookies after reopen = %+v, %v", bs, err)
	}
	next, err := c.CreateLedger(ctx, catalog.LedgerSpec{Topic: "orders", TopicID: tp.ID, Partition: 0,
		Replication: catalog.DefaultReplication, Ensemble: []string{"b1:1", "b2:1", "b3:1"}, WriterOwner: "x", WriterEpoch: 1})
	if err != nil || next.ID <= m.ID {
		t.Fatalf("ledger id after reopen = %d, %v; want above %d (ids are never reused)", next.ID, err, m.ID)
	}
}

func TestDataSurvivesCloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	clock := catalogtest.NewClock(catalogtest.Start)
	c, err := embedded.Open(dir, embedded.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	tp, p, m := populate(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTopic(context.Background(), "orders"); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("GetTopic after Close: %v, want ErrClosed", err)
	}

	c, err = embedded.Open(dir, embedded.Options{Clock: clock})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer c.Close()
	verify(t, c, tp, p, m)
}

// TestAcknowledgedWritesSurviveACrash crashes the filesystem right after the
// writes returned, keeping only what was synced: every returned write must
// be there (each commit is synced).
func TestAcknowledgedWritesSurviveACrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := catalogtest.NewClock(catalogtest.Start)
	c, err := embedded.Open("catalog", embedded.Options{FS: fs, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	tp, p, m := populate(t, c)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // synced data only
	_ = c.Close()

	c, err = embedded.Open("catalog", embedded.Options{FS: crashed, Clock: clock})
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	defer c.Close()
	verify(t, c, tp, p, m)
}

func TestSecondOpenOfTheSameDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	c, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c2, err := embedded.Open(dir, embedded.Options{}); err == nil {
		_ = c2.Close()
		t.Fatal("a second Open of a directory in use succeeded; two processes would race on one catalog")
	}
}
