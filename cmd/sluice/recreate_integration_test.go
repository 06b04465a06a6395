//go:build integration

package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/bookieproc"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// A topic deleted and created again while producers keep producing to it
// (docs/DESIGN.md, "Topic identity"): an acknowledgement names the topic
// incarnation that holds the records; none names the deleted one for a
// request sent after DeleteTopic answered; every record acknowledged into
// the new incarnation is readable there at its offset, which starts at 0;
// and the new incarnation holds no record acknowledged into the old one.
func TestIntegrationDevDeleteAndRecreateUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	api := newDevAPI(addr)
	admin, prod, cons := api.admin, api.prod, api.cons
	cmd, out := startDevServing(ctx, t, api, bin, t.TempDir(), addr)
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()

	const parts = 3
	create := func() string {
		resp, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "dr", Partitions: parts}))
		if err != nil {
			t.Fatalf("create topic: %v\n%s", err, out.String())
		}
		if resp.Msg.GetTopic().GetTopicId() == "" {
			t.Fatal("CreateTopic answered no topic id")
		}
		return resp.Msg.GetTopic().GetTopicId()
	}
	oldID := create()

	type ack struct {
		value   string
		topicID string
		part    int32
		offset  int64
		sent    time.Time
	}
	var (
		mu      sync.Mutex
		acks    []ack
		refused int
	)
	pctx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for part := range int32(parts) {
		wg.Go(func() {
			for i := 0; pctx.Err() == nil; i++ {
				v := fmt.Sprintf("p%d-%d", part, i)
				sent := time.Now()
				resp, err := prod.Produce(pctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "dr", Partition: &part,
					Records: []*sluicev1.Record{{Value: []byte(v)}}}))
				if err != nil {
					switch connect.CodeOf(err) {
					case connect.CodeNotFound, connect.CodeUnavailable, connect.CodeCanceled:
						mu.Lock()
						refused++
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
						continue
					}
					t.Errorf("produce %s: %v", v, err)
					return
				}
				r := resp.Msg.GetResults()[0]
				mu.Lock()
				acks = append(acks, ack{v, resp.Msg.GetTopicId(), r.GetPartition(), r.GetOffset(), sent})
				mu.Unlock()
			}
		})
	}
	time.Sleep(700 * time.Millisecond)
	if _, err := admin.DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: "dr"})); err != nil {
		t.Fatalf("delete topic: %v\n%s", err, out.String())
	}
	deleted := time.Now()
	time.Sleep(200 * time.Millisecond) // producers meet the deleted topic
	newID := create()
	if newID == oldID {
		t.Fatalf("the re-created topic has the deleted one's id %s", oldID)
	}
	time.Sleep(1500 * time.Millisecond)
	stopProducers()
	wg.Wait()

	inNew := map[int32]map[int64]string{}
	ackedOld := map[string]bool{}
	nNew := 0
	for _, a := range acks {
		switch a.topicID {
		case oldID:
			if a.sent.After(deleted) {
				t.Errorf("%s sent %v after DeleteTopic answered was acknowledged into the deleted topic", a.value, a.sent.Sub(deleted))
			}
			ackedOld[a.value] = true
		case newID:
			if inNew[a.part] == nil {
				inNew[a.part] = map[int64]string{}
			}
			inNew[a.part][a.offset] = a.value
			nNew++
		default:
			t.Errorf("%s acknowledged with topic id %q, neither the deleted %s nor the new %s", a.value, a.topicID, oldID, newID)
		}
	}
	if len(ackedOld) == 0 || nNew == 0 {
		t.Fatalf("%d acknowledgements into the deleted topic and %d into the new one (refused %d); the test needs both", len(ackedOld), nNew, refused)
	}
	for part := range int32(parts) {
		var got []string
		for next := int64(0); ; {
			resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "dr", Partition: part, Offset: next, MaxRecords: 1000}))
			if err != nil {
				t.Fatalf("fetch %d@%d: %v", part, next, err)
			}
			for _, r := range resp.Msg.GetRecords() {
				if r.GetOffset() != int64(len(got)) {
					t.Fatalf("partition %d: record at offset %d after %d records", part, r.GetOffset(), len(got))
				}
				got = append(got, string(r.GetValue()))
			}
			if len(resp.Msg.GetRecords()) == 0 {
				break
			}
			next = resp.Msg.GetNextOffset()
		}
		for off, v := range inNew[part] {
			if off >= int64(len(got)) || got[off] != v {
				t.Errorf("partition %d: %s acknowledged at offset %d of the new topic; the topic holds %d records there", part, v, off, len(got))
			}
		}
		for off, v := range got {
			if ackedOld[v] {
				t.Errorf("partition %d offset %d of the new topic holds %s, acknowledged into the deleted topic", part, off, v)
			}
		}
	}
	t.Logf("%d acknowledged into the deleted topic, %d into the new one, %d refused while it was gone or moving", len(ackedOld), nNew, refused)
}
