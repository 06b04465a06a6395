package embedded_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/bookkeeping/bookkeepingtest"
	"github.com/sluicemq/sluice/pkg/bookkeeping/embedded"
)

// state is what writeState stores and checkState expects back.
type state struct {
	epoch    int64
	producer bookkeeping.Producer
	txn      bookkeeping.Txn
	lastID   int64
}

// writeState stores one of everything: a member, a lease, a committed offset,
// a transactional producer, a transaction's state and allocated ids.
func writeState(t *testing.T, s *bookkeeping.Store) state {
	t.Helper()
	ctx := t.Context()
	var st state
	var err error
	if err = s.Join(ctx, "g", bookkeeping.Member{ID: "m", ClientInfo: "host-1", SessionTimeout: time.Minute, Topics: []string{"orders", "audit"}}); err != nil {
		t.Fatal(err)
	}
	if st.epoch, err = s.Acquire(ctx, "g", "orders", 2, "m"); err != nil {
		t.Fatal(err)
	}
	c := bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "id", Member: "m", Offsets: []bookkeeping.PartitionOffset{{Partition: 2, Offset: 77, Epoch: st.epoch, Metadata: "meta"}}}
	if err = s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if st.producer, err = s.InitProducer(ctx, "txn"); err != nil {
		t.Fatal(err)
	}
	open := bookkeeping.Txn{TransactionalID: "open", ProducerID: st.producer.ID + 100, Epoch: 3, Status: bookkeeping.TxnOngoing,
		Timeout: time.Minute, Deadline: epoch.Add(time.Minute), Partitions: []bookkeeping.TxnPartition{{TopicID: "id", Partition: 2}}, Groups: []string{"g"}}
	if st.txn, err = s.PutTxn(ctx, open); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if st.lastID, err = s.AllocateProducerID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// checkState fails t unless s holds what writeState stored.
func checkState(t *testing.T, s *bookkeeping.Store, st state) {
	t.Helper()
	ctx := t.Context()
	ms, err := s.ListMembers(ctx, "g")
	wantMember := bookkeeping.Member{ID: "m", ClientInfo: "host-1", SessionTimeout: time.Minute, Topics: []string{"orders", "audit"}, LastHeartbeat: epoch}
	if err != nil || len(ms) != 1 || !reflect.DeepEqual(ms[0], wantMember) {
		t.Fatalf("members after reopen = %+v, %v; want [%+v]", ms, err, wantMember)
	}
	if gs, more, err := s.ListGroups(ctx, "", 10); err != nil || !slices.Equal(gs, []string{"g"}) || more {
		t.Fatalf("groups after reopen = %q (more %v), %v; want [g]", gs, more, err)
	}
	ls, err := s.ListLeases(ctx, "g", "orders")
	want := bookkeeping.Lease{Partition: 2, Owner: "m", Epoch: st.epoch, Offset: 77, Metadata: "meta", TopicID: "id"}
	if err != nil || len(ls) != 1 || ls[0] != want {
		t.Fatalf("leases after reopen = %+v, %v; want [%+v]", ls, err, want)
	}
	if c, err := s.FetchOffset(ctx, "g", "orders", 2); err != nil || c != (bookkeeping.Committed{Offset: 77, Metadata: "meta", Epoch: st.epoch, TopicID: "id"}) {
		t.Fatalf("FetchOffset after reopen = %+v, %v; want offset 77 of topic id \"id\"", c, err)
	}
	if ep, err := s.Acquire(ctx, "g", "orders", 2, "m"); err != nil || ep != st.epoch {
		t.Fatalf("Acquire after reopen = %d, %v; want the same epoch %d", ep, err, st.epoch)
	}
	p, err := s.InitProducer(ctx, "txn")
	if err != nil || p != (bookkeeping.Producer{ID: st.producer.ID, Epoch: st.producer.Epoch + 1}) {
		t.Fatalf("InitProducer after reopen = %+v, %v; want id %d epoch %d", p, err, st.producer.ID, st.producer.Epoch+1)
	}
	if got, err := s.GetTxn(ctx, "open"); err != nil || !reflect.DeepEqual(got, st.txn) {
		t.Fatalf("GetTxn after reopen = %+v, %v; want %+v", got, err, st.txn)
	}
	if id, err := s.AllocateProducerID(ctx); err != nil || id <= st.lastID {
		t.Fatalf("AllocateProducerID after reopen = %d, %v; want above %d", id, err, st.lastID)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	clock := bookkeepingtest.NewFakeClock(epoch)
	s, err := embedded.Open(dir, embedded.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	st := writeState(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FetchOffset(context.Background(), "g", "orders", 2); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("FetchOffset on a closed store: %v, want ErrClosed", err)
	}

	s2, err := embedded.Open(dir, embedded.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	checkState(t, s2, st)
}

// TestCrashKeepsAcknowledgedWrites: after a crash that loses every byte not
// synced, every call that returned is still there — writes are synced before
// they are acknowledged.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := bookkeepingtest.NewFakeClock(epoch)
	s, err := embedded.Open("/data", embedded.WithFS(fs), embedded.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	st := writeState(t, s)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // only synced data survives
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := embedded.Open("/data", embedded.WithFS(crashed), embedded.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	defer s2.Close()
	checkState(t, s2, st)
}

func TestOpenValidatesOptions(t *testing.T) {
	for name, open := range map[string]func() (*bookkeeping.Store, error){
		"empty dir":  func() (*bookkeeping.Store, error) { return embedded.Open("") },
		"nil clock":  func() (*bookkeeping.Store, error) { return embedded.Open(t.TempDir(), embedded.WithClock(nil)) },
		"nil fs":     func() (*bookkeeping.Store, error) { return embedded.Open(t.TempDir(), embedded.WithFS(nil)) },
		"nil logger": func() (*bookkeeping.Store, error) { return embedded.Open(t.TempDir(), embedded.WithLogger(nil)) },
	} {
		s, err := open()
		var ve *bookkeeping.ValidationError
		if !errors.As(err, &ve) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open with %s: %v, want a *ValidationError", name, err)
		}
	}
}
