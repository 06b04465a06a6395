package bookie

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(fs vfs.FS) Config {
	return Config{
		ID: "bookie-1", InstanceID: "test", Dir: "/data", FS: fs,
		MaxEntryBytes: 64 << 10, MaxReadBytes: 256 << 10, MaxInFlightAdds: 64,
		WriteBufferBytes: 1 << 20, MaxLogFileSize: 256 << 10, JournalMaxFileSize: 256 << 10, JournalGroupBytes: 64 << 10,
		CheckpointInterval: time.Hour, DiskCheckInterval: time.Hour, GCInterval: -1,
	}
}

func mustOpen(t testing.TB, cfg Config) *Bookie {
	t.Helper()
	b, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func mustClose(t testing.TB, b *Bookie) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

var testKey = []byte("master-key")

func payload(ledger, entry int64) []byte {
	return fmt.Appendf(nil, "ledger %d entry %d payload", ledger, entry)
}

// addReq is an AddEntries message carrying one add.
func addReq(ledger, entry, lac int64) *bookiev1.AddEntriesRequest {
	return addMsg(ledger, add(ledger, entry, lac))
}

// addMsg is an AddEntries message carrying adds to ledger (one group).
func addMsg(ledger int64, adds ...*bookiev1.Add) *bookiev1.AddEntriesRequest {
	return &bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{{LedgerId: ledger, MasterKey: testKey, Adds: adds}}}
}

// add is one add of entry to ledger, with its payload and checksum.
func add(ledger, entry, lac int64) *bookiev1.Add {
	p := payload(ledger, entry)
	return &bookiev1.Add{EntryId: entry, Lac: lac, Payload: p, Crc32C: wire.EntryChecksum(ledger, entry, lac, p)}
}

// result is one add's answer as the tests compare them.
type result struct {
	ledger, entry int64
	status        bookiev1.AddStatus
}

// receiveResults receives responses until n results came, and returns
// them in order with how many responses carried them.
func receiveResults(t testing.TB, stream *connect.BidiStreamForClient[bookiev1.AddEntriesRequest, bookiev1.AddEntriesResponse], n int) ([]result, int) {
	t.Helper()
	var out []result
	responses := 0
	for len(out) < n {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("receive after %d results: %v", len(out), err)
		}
		responses++
		if len(resp.GetLedgers()) == 0 {
			t.Fatalf("response %d carries no results", responses)
		}
		for _, g := range resp.GetLedgers() {
			if len(g.GetResults()) == 0 {
				t.Fatalf("response %d: ledger %d's group carries no results", responses, g.GetLedgerId())
			}
			for _, r := range g.GetResults() {
				out = append(out, result{g.GetLedgerId(), r.GetEntryId(), r.GetStatus()})
			}
		}
	}
	if len(out) > n {
		t.Fatalf("%d results, want %d", len(out), n)
	}
	return out, responses
}

// addWait adds directly (no RPC) and waits for the journal.
func addWait(t testing.TB, b *Bookie, ledger, entry, lac int64) {
	t.Helper()
	p := payload(ledger, entry)
	done := make(chan error, 1)
	err := b.Add(context.Background(), AddRequest{
		Ledger: ledger, Entry: entry, LAC: lac, Payload: p, MasterKey: testKey,
		Checksum: wire.EntryChecksum(ledger, entry, lac, p),
	}, func(err error) { done <- err })
	if err == nil {
		err = <-done
	}
	if err != nil {
		t.Fatalf("add %d/%d: %v", ledger, entry, err)
	}
}

// serve runs b's handler on a loopback HTTP/2 (h2c) server and returns a
// client using the gRPC protocol, as the ledger client does.
func serve(t testing.TB, b *Bookie) bookiev1connect.BookieServiceClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(b.Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &cp}
	t.Cleanup(tr.CloseIdleConnections)
	return bookiev1connect.NewBookieServiceClient(&http.Client{Transport: tr}, srv.URL, connect.WithGRPC())
}
