package ledger

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/harness/transcript"
	"github.com/sluicemq/sluice/pkg/catalog"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt transcripts")

// TestTranscripts runs every testdata/*.txt transcript: blocks of one
// command, a "----" line and the actions (or error) it must produce,
// separated by blank lines; lines starting with # are comments. Run
// `go test ./bookkeeper/ledger -run Transcripts -rewrite` to regenerate the
// expected output after a deliberate change, and review the diff.
//
// Commands (entries are written eN, bookies by id):
//
//	writer e=E qw=Qw qa=Qa bookies=b1,b2,b3 [inflight=N] [maxchanges=N] [maxbytes=N]
//	recovery e=E qw=Qw qa=Qa segments=0:b1,b2,b3;5:b1,b4,b3 [window=N] [no-read-fence] [read-below-segment]
//	reader e=E qw=Qw qa=Qa segments=... [closed=eN] [outstanding=N]
//	append P | ack B eN | fail B eN unavailable|fenced|unauthorized | tick
//	replaced from=eN ensemble=b1,b4,b3 [rejoined=b2] | change-failed | stop | close
//	fence-ok B lac=N | fence-failed B
//	read-ok B eN P | no-entry B eN | read-failed B eN
//	read eN | lac N | spec eN | closed eN | segments 0:b1,b2;4:b3,b2 | state
func TestTranscripts(t *testing.T) {
	transcript.Files(t, "testdata/*.txt", *rewrite, "(no actions)", func(*testing.T) func(string) []string {
		h := &harness{}
		return h.run
	})
}

// harness holds the machine a transcript drives.
type harness struct {
	w   *Writer
	rec *Recovery
	rd  *Reader
}

func (h *harness) run(cmd string) []string {
	f := strings.Fields(cmd)
	if f[0] == "state" {
		return []string{h.state()}
	}
	acts, err := h.exec(f[0], f[1:])
	var out []string
	for _, a := range acts {
		out = append(out, a.String())
	}
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func (h *harness) exec(name string, args []string) ([]Action, error) {
	kv := map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			kv[a] = ""
		}
	}
	switch name {
	case "writer", "recovery", "reader":
		return h.create(name, kv)
	case "closed", "segments":
		if h.rd == nil {
			return nil, errors.New(name + " needs a reader")
		}
		ev := MetadataChanged{Ensembles: h.rd.segments}
		if name == "closed" {
			ev.Closed, ev.LastEntry = true, entry(args[0])
		} else {
			ev.Ensembles = parseSegments(args[0])
		}
		return h.rd.Step(ev)
	}
	ev, err := parseEvent(name, args)
	if err != nil {
		return nil, err
	}
	switch {
	case h.w != nil:
		return h.w.Step(ev)
	case h.rec != nil:
		return h.rec.Step(ev)
	case h.rd != nil:
		return h.rd.Step(ev)
	}
	return nil, errors.New("no machine: start with writer, recovery or reader")
}

func (h *harness) create(name string, kv map[string]string) ([]Action, error) {
	*h = harness{}
	cfg := Config{Replication: catalog.Replication{Ensemble: atoi(kv["e"]), WriteQuorum: atoi(kv["qw"]), AckQuorum: atoi(kv["qa"])}}
	cfg.MaxInFlight = atoi(kv["inflight"])
	cfg.MaxEnsembleChanges = atoi(kv["maxchanges"])
	cfg.MaxEntryBytes = atoi(kv["maxbytes"])
	cfg.RecoveryReadWindow = atoi(kv["window"])
	cfg.MaxOutstandingReads = atoi(kv["outstanding"])
	_, cfg.unsafe.noReadFence = kv["no-read-fence"]
	_, cfg.unsafe.readBelowSegment = kv["read-below-segment"]
	var err error
	switch name {
	case "writer":
		h.w, err = NewWriter(cfg, strings.Split(kv["bookies"], ","))
		return nil, err
	case "recovery":
		h.rec, err = NewRecovery(cfg, parseSegments(kv["segments"]))
		if err != nil {
			return nil, err
		}
		return h.rec.Start(), nil
	default:
		m := catalog.LedgerMetadata{Ensembles: parseSegments(kv["segments"]), State: catalog.LedgerOpen, LastEntry: -1}
		if v, ok := kv["closed"]; ok {
			m.State, m.LastEntry = catalog.LedgerClosed, entry(v)
		}
		h.rd, err = NewReader(cfg, m)
		return nil, err
	}
}

func (h *harness) state() string {
	switch {
	case h.w != nil:
		w := h.w
		return fmt.Sprintf("state: lac=%d next=e%d pending=%d failed=%v change=%v segments=%v", w.lac, w.NextEntry(), len(w.pending), w.failed, w.change != nil, w.segments)
	case h.rec != nil:
		r := h.rec
		end, done := r.End()
		return fmt.Sprintf("state: phase=%d fenced=%v maxlac=%d start=e%d recovered=e%d done=%v end=e%d reads=%d adds=%d", r.phase, r.fenced, r.maxLAC, r.start, r.recovered, done, end, len(r.reads), len(r.adds))
	case h.rd != nil:
		return fmt.Sprintf("state: closed=%v readable-to=e%d reads=%d", h.rd.closed, h.rd.LAC(), len(h.rd.reads))
	}
	return "state: none"
}

func parseEvent(name string, a []string) (Event, error) {
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch name {
	case "append":
		return Append{Payload: []byte(arg(0))}, nil
	case "ack":
		return AddAcked{Bookie: arg(0), Entry: entry(arg(1))}, nil
	case "fail":
		r := map[string]FailReason{"unavailable": FailUnavailable, "fenced": FailFenced, "unauthorized": FailUnauthorized}[arg(2)]
		return AddFailed{Bookie: arg(0), Entry: entry(arg(1)), Reason: r}, nil
	case "tick":
		return Tick{}, nil
	case "replaced":
		kv := map[string]string{}
		for _, s := range a {
			k, v, _ := strings.Cut(s, "=")
			kv[k] = v
		}
		ev := BookieReplaced{FirstEntry: entry(kv["from"]), Ensemble: strings.Split(kv["ensemble"], ",")}
		if r := kv["rejoined"]; r != "" {
			ev.Rejoined = strings.Split(r, ",")
		}
		return ev, nil
	case "change-failed":
		return EnsembleChangeFailed{Err: errors.New("no spare bookie")}, nil
	case "stop":
		return Stop{Err: errors.New("lease lost")}, nil
	case "close":
		return Close{}, nil
	case "fence-ok":
		return FenceOK{Bookie: arg(0), LAC: int64(atoi(strings.TrimPrefix(arg(1), "lac=")))}, nil
	case "fence-failed":
		return FenceFailed{Bookie: arg(0)}, nil
	case "read-ok":
		return ReadOK{Bookie: arg(0), Entry: entry(arg(1)), Payload: []byte(arg(2))}, nil
	case "no-entry":
		return ReadNoEntry{Bookie: arg(0), Entry: entry(arg(1))}, nil
	case "read-failed":
		return ReadFailed{Bookie: arg(0), Entry: entry(arg(1))}, nil
	case "read":
		return Read{Entry: entry(arg(0))}, nil
	case "lac":
		return LacLearned{LAC: int64(atoi(arg(0)))}, nil
	case "spec":
		return SpeculativeTimeout{Entry: entry(arg(0))}, nil
	}
	return nil, fmt.Errorf("unknown command %q", name)
}

func parseSegments(s string) []catalog.EnsembleSegment {
	var out []catalog.EnsembleSegment
	for _, part := range strings.Split(s, ";") {
		first, bookies, _ := strings.Cut(part, ":")
		out = append(out, catalog.EnsembleSegment{FirstEntry: int64(atoi(first)), Bookies: strings.Split(bookies, ",")})
	}
	return out
}

func entry(s string) int64 { return int64(atoi(strings.TrimPrefix(s, "e"))) }

func atoi(s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("bad number %q", s))
	}
	return n
}
