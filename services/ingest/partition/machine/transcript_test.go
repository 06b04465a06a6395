package machine

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/transcript"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt transcripts")

// TestTranscripts runs every testdata/*.txt transcript: blocks of one
// command, a "----" line and the actions it must produce, separated by
// blank lines; lines starting with # are comments. After a deliberate
// change, run `go test ./services/ingest/partition/machine -run Transcripts
// -rewrite` and review the diff.
//
// Commands (batches are named by their tag, ledgers L1, L2, ... in the
// order opened; the clock starts at 0 and moves only with tick):
//
//	writer [last=N] [entry=BYTES] [inflight=N] [buffered=BYTES] [linger=D] [roll-bytes=BYTES] [roll-age=D] [open=PID:EPOCH:FIRST,...]
//	enqueue TAG [records=N] [size=BYTES] [producer=ID seq=S [epoch=E] [txn]] | enqueue TAG raw=BYTES
//	mark TAG producer=ID epoch=E commit|abort
//	settle gG eS [fail|fenced]
//	linger | retry | close | close-timeout | roll gG | tick D
//	opened [first=N] | open-failed [fenced] | sealed | seal-failed [fenced]
//	recovered N | recover-failed [fenced] | released | release-failed
//	state
func TestTranscripts(t *testing.T) {
	transcript.Files(t, "testdata/*.txt", *rewrite, "(no actions)", func(t *testing.T) func(string) []string {
		h := &harness{t: t}
		return h.run
	})
}

// harness drives one machine through a transcript.
type harness struct {
	t      *testing.T
	m      *Writer
	now    time.Time
	asked  int64 // FirstOffset of the last OpenLedger
	opened int   // ledgers opened so far
}

func (h *harness) run(cmd string) []string {
	f := strings.Fields(cmd)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else if a == "txn" {
			args[a] = ""
		} else {
			pos = append(pos, a)
		}
	}
	if f[0] == "writer" {
		return h.newWriter(args)
	}
	if h.m == nil {
		h.t.Fatalf("%q before writer", cmd)
	}
	var ev Event
	switch f[0] {
	case "enqueue":
		ev = Enqueue{Batch: h.batch(args), Tag: pos[0], Now: h.now}
	case "mark":
		ev = Mark{ProducerID: h.num(args["producer"]), Epoch: int16(h.num(args["epoch"])), Commit: pos[1] == "commit", Tag: pos[0], Now: h.now}
	case "settle":
		g, s := h.num(strings.TrimPrefix(pos[0], "g")), h.num(strings.TrimPrefix(pos[1], "e"))
		e := Settled{Gen: g, Seq: s, Now: h.now}
		if len(pos) > 2 {
			e.Err = h.failure(pos[2])
		}
		ev = e
	case "linger":
		ev = LingerExpired{Now: h.now}
	case "retry":
		ev = RetryDue{}
	case "close":
		ev = Close{}
	case "close-timeout":
		ev = CloseTimedOut{}
	case "roll":
		ev = Roll{Gen: h.num(strings.TrimPrefix(pos[0], "g"))}
	case "tick":
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			h.t.Fatal(err)
		}
		h.now = h.now.Add(d)
		return nil
	case "opened":
		h.opened++
		first := h.asked
		if v, ok := args["first"]; ok {
			first = h.num(v)
		}
		ev = Opened{Handle: fmt.Sprintf("L%d", h.opened), ID: catalog.LedgerID(h.opened), FirstOffset: first, Now: h.now}
	case "open-failed":
		ev = OpenFailed{Err: h.failure(append(pos, "")[0])}
	case "sealed":
		ev = SealDone{}
	case "seal-failed":
		ev = SealDone{Err: h.failure(append(pos, "")[0])}
	case "recovered":
		ev = Recovered{LastOffset: h.num(pos[0])}
	case "recover-failed":
		ev = Recovered{Err: h.failure(append(pos, "")[0])}
	case "released":
		ev = Released{}
	case "release-failed":
		ev = Released{Err: errors.New("catalog unavailable")}
	case "state":
		return []string{h.state()}
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	return h.lines(h.m.Step(ev))
}

func (h *harness) newWriter(args map[string]string) []string {
	cfg := Config{Topic: "t", Partition: 0, Epoch: 3, MaxEntryBytes: 1000, MaxInFlightEntries: 2,
		MaxBufferedBytes: 10000, RollBytes: 1 << 20, RollAge: time.Hour}
	if v, ok := args["entry"]; ok {
		cfg.MaxEntryBytes = int(h.num(v))
	}
	if v, ok := args["inflight"]; ok {
		cfg.MaxInFlightEntries = int(h.num(v))
	}
	if v, ok := args["buffered"]; ok {
		cfg.MaxBufferedBytes = h.num(v)
	}
	if v, ok := args["roll-bytes"]; ok {
		cfg.RollBytes = h.num(v)
	}
	for k, p := range map[string]*time.Duration{"linger": &cfg.Linger, "roll-age": &cfg.RollAge} {
		if v, ok := args[k]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				h.t.Fatal(err)
			}
			*p = d
		}
	}
	st, err := dedup.New(dedup.Config{})
	if err != nil {
		h.t.Fatal(err)
	}
	last := int64(-1)
	if v, ok := args["last"]; ok {
		last = h.num(v)
	}
	var open []OpenTxn
	if v, ok := args["open"]; ok {
		for _, o := range strings.Split(v, ",") {
			f := strings.Split(o, ":")
			open = append(open, OpenTxn{ProducerID: h.num(f[0]), Epoch: int16(h.num(f[1])), First: h.num(f[2])})
		}
	}
	h.now, h.opened = time.Unix(0, 0), 0
	m, acts := New(cfg, st, open, last)
	h.m = m
	return h.lines(acts)
}

func (h *harness) lines(acts []Action) []string {
	var out []string
	for _, a := range acts {
		if o, ok := a.(OpenLedger); ok {
			h.asked = o.FirstOffset
		}
		out = append(out, a.String())
	}
	return out
}

func (h *harness) num(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		h.t.Fatalf("bad number %q", s)
	}
	return n
}

func (h *harness) failure(kind string) error {
	if kind == "fenced" {
		return fmt.Errorf("%w: ledger fenced by another writer's recovery", ErrFenced)
	}
	return errors.New("bookie b2 unavailable")
}

// batch builds a record batch: records=N (1) of size=BYTES (10) each, with
// an idempotent producer header when producer= is given.
func (h *harness) batch(args map[string]string) []byte {
	if v, ok := args["raw"]; ok {
		return make([]byte, h.num(v)) // not a batch: for the size check
	}
	n, size := int64(1), int64(10)
	if v, ok := args["records"]; ok {
		n = h.num(v)
	}
	if v, ok := args["size"]; ok {
		size = h.num(v)
	}
	opts := record.BuilderOptions{}
	if v, ok := args["producer"]; ok {
		opts.Producer = &record.Producer{ID: h.num(v), BaseSequence: int32(h.num(args["seq"]))}
		if e, ok := args["epoch"]; ok {
			opts.Producer.Epoch = int16(h.num(e))
		}
		_, opts.Transactional = args["txn"]
	}
	return buildBatch(h.t, opts, int(n), int(size))
}

func buildBatch(t testing.TB, opts record.BuilderOptions, n, size int) []byte {
	t.Helper()
	b, err := record.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := b.Append(&record.Record{Value: make([]byte, size)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *harness) state() string {
	m := h.m
	l := "none"
	if m.ledger != nil {
		l = fmt.Sprintf("%v(g%d from %d, %d bytes", m.ledger.handle, m.ledger.gen, m.ledger.first, m.ledger.bytes)
		if m.ledger.failed {
			l += ", failed"
		}
		l += ")"
	}
	ops := [...]string{"none", "open", "seal", "recover", "release"}
	return fmt.Sprintf("phase=%v next=%d sent=%d acked=%d lso=%d open=%d ledger=%s queue=%d inflight=%d buffered=%d op=%s retry=%v",
		m.phase, m.next, m.lastSent, m.acked, m.StableOffset(), m.OpenTxns(), l, len(m.queue), len(m.inflight), m.buffered, ops[m.op], m.retryArmed)
}
