package txn

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/transcript"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt transcripts")

// TestTranscripts runs every testdata/*.txt transcript: blocks of one
// command, a "----" line and what the coordinator decided, separated by
// blank lines; lines starting with # are comments. After a deliberate
// change, run `go test ./services/ingest/txn -run Transcripts -rewrite` and
// review the diff.
//
// Commands (one transactional id, "tx"; the clock starts at 0 and moves
// only with tick; producer ids are allocated 100, 101, ...):
//
//	init [timeout=D] [resume=PID/EPOCH]
//	add pid=N epoch=E parts=TOPIC/P,...
//	group pid=N epoch=E g=GROUP
//	offsets pid=N epoch=E g=GROUP o=TOPIC/P@OFFSET,...
//	end pid=N epoch=E commit|abort [next=TOPIC/P,...]
//	expire | markers-written | tick D | state
//	set-epoch E (sets the stored epoch, as if E transactions had ended)
func TestTranscripts(t *testing.T) {
	transcript.Files(t, "testdata/*.txt", *rewrite, "(nothing)", func(t *testing.T) func(string) []string {
		h := &harness{t: t, now: time.Unix(0, 0), nextID: 100}
		return h.run
	})
}

// harness is one transactional id over a model of the store: the state
// and its compare-and-set version.
type harness struct {
	t      *testing.T
	now    time.Time
	cur    *State
	nextID int64
}

func (h *harness) run(cmd string) []string {
	f := strings.Fields(cmd)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	var ev Event
	switch f[0] {
	case "init":
		timeout := time.Minute
		if v, ok := args["timeout"]; ok {
			timeout = h.dur(v)
		}
		ie := InitProducer{Timeout: timeout, Now: h.now}
		if v, ok := args["resume"]; ok {
			pid, epoch, _ := strings.Cut(v, "/")
			ie.Resume = &Reply{ProducerID: h.num(pid), Epoch: int16(h.num(epoch))}
		}
		ev = ie
	case "add":
		ev = AddPartitions{ProducerID: h.num(args["pid"]), Epoch: int16(h.num(args["epoch"])), Partitions: h.parts(args["parts"]), Now: h.now}
	case "group":
		ev = AddGroup{ProducerID: h.num(args["pid"]), Epoch: int16(h.num(args["epoch"])), Group: args["g"], Now: h.now}
	case "offsets":
		var os []Offset
		for _, o := range strings.Split(args["o"], ",") {
			tp, off, _ := strings.Cut(o, "@")
			topic, n, _ := strings.Cut(tp, "/")
			os = append(os, Offset{Group: args["g"], Topic: topic, TopicID: "id-" + topic, Partition: int32(h.num(n)), Offset: h.num(off)})
		}
		ev = AddOffsets{ProducerID: h.num(args["pid"]), Epoch: int16(h.num(args["epoch"])), Offsets: os, Now: h.now}
	case "end":
		ev = EndTxn{ProducerID: h.num(args["pid"]), Epoch: int16(h.num(args["epoch"])), Commit: slices.Contains(pos, "commit"), Next: h.parts(args["next"]), Now: h.now}
	case "expire":
		ev = Expire{Now: h.now}
	case "markers-written":
		ev = MarkersWritten{}
	case "set-epoch":
		// As if the id's producer had ended that many transactions.
		h.cur.Epoch, h.cur.PrevProducerID = int16(h.num(pos[0])), 0
		return []string{h.cur.String()}
	case "tick":
		h.now = h.now.Add(h.dur(pos[0]))
		return nil
	case "state":
		if h.cur == nil {
			return []string{"(none)"}
		}
		return []string{h.cur.String()}
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	return h.step(ev)
}

// step carries out a decision as the driver does, and prints it.
func (h *harness) step(ev Event) []string {
	var out []string
	d := Step("tx", h.cur, ev)
	if d.NeedProducerID {
		out = append(out, fmt.Sprintf("allocate producer id %d", h.nextID))
		d = Step("tx", h.cur, WithFreshID(ev, h.nextID))
		h.nextID++
	}
	if d.Err != nil {
		if d.Store != nil {
			out = append(out, h.store(d.Store))
		}
		if d.Markers != nil {
			out = append(out, "write "+markersString(d.Markers))
		}
		return append(out, "error: "+d.Err.Error())
	}
	if d.Store != nil {
		out = append(out, h.store(d.Store))
	}
	if d.Markers != nil {
		out = append(out, "write "+markersString(d.Markers))
	}
	r := fmt.Sprintf("reply pid=%d epoch=%d", d.Reply.ProducerID, d.Reply.Epoch)
	if d.Pending {
		r += " (once the markers are written)"
	}
	if len(d.Next) > 0 {
		ns := make([]string, len(d.Next))
		for i, p := range d.Next {
			ns[i] = p.String()
		}
		r += " next=[" + strings.Join(ns, " ") + "]"
	}
	if d.Reply != (Reply{}) {
		out = append(out, r)
	}
	return out
}

// store applies a compare-and-set and checks the State invariants.
func (h *harness) store(next *State) string {
	want := int64(0)
	if h.cur != nil {
		want = h.cur.Version
	}
	if next.Version != want {
		h.t.Fatalf("store with version %d over version %d", next.Version, want)
	}
	if h.cur != nil && next.ProducerID == h.cur.ProducerID && next.Epoch < h.cur.Epoch {
		h.t.Fatalf("epoch moved back: %d after %d", next.Epoch, h.cur.Epoch)
	}
	if err := checkInvariants(next); err != nil {
		h.t.Fatal(err)
	}
	s := next.clone()
	s.Version = want + 1
	h.cur = &s
	return "store " + s.String()
}

// checkInvariants checks State's invariants on a state to be stored.
func checkInvariants(s *State) error {
	switch {
	case s.Status.idle() && (len(s.Partitions) > 0 || len(s.Groups) > 0 || len(s.Offsets) > 0):
		return fmt.Errorf("partitions, groups or offsets in state %v", s)
	case (s.Status == Ongoing || s.Status.preparing() && len(s.Next) > 0) != !s.Deadline.IsZero():
		return fmt.Errorf("deadline %v in state %v", s.Deadline, s)
	case len(s.Next) > 0 && !s.Status.preparing():
		return fmt.Errorf("next partitions outside a Prepare: %v", s)
	case s.Ended != 0 && (s.Status != Ongoing || s.Ended != CompleteCommit && s.Ended != CompleteAbort):
		return fmt.Errorf("ended %v in state %v", s.Ended, s)
	case s.TimedOut && (!s.BumpedByCoordinator || s.Status == Ongoing || s.Status == PrepareCommit):
		return fmt.Errorf("timed out in state %v", s)
	case s.Epoch < 0 || s.Epoch > MaxEpoch || s.Epoch == MaxEpoch && !s.BumpedByCoordinator:
		return fmt.Errorf("epoch %d given to a client: %v", s.Epoch, s)
	case s.PrevProducerID != 0 && (s.Epoch != 0 || s.BumpedByCoordinator):
		return fmt.Errorf("a replaced producer id after a bump: %v", s)
	}
	return nil
}

func markersString(m *Markers) string {
	kind := "abort"
	if m.Commit {
		kind = "commit"
	}
	parts := make([]string, len(m.Partitions))
	for i, p := range m.Partitions {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s markers pid=%d epoch=%d to [%s] groups=[%s]%s", kind, m.ProducerID, m.Epoch, strings.Join(parts, " "), strings.Join(m.Groups, " "), offsetsString(m.Offsets))
}

// offsetsString is " offsets=[g:topic/p@offset ...]", or "" for none.
func offsetsString(os []Offset) string {
	if len(os) == 0 {
		return ""
	}
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = fmt.Sprintf("%s:%s/%d@%d", o.Group, o.Topic, o.Partition, o.Offset)
	}
	return " offsets=[" + strings.Join(s, " ") + "]"
}

// parts parses TOPIC/P,... (nil for "").
func (h *harness) parts(v string) []Partition {
	if v == "" {
		return nil
	}
	var ps []Partition
	for _, p := range strings.Split(v, ",") {
		topic, n, _ := strings.Cut(p, "/")
		ps = append(ps, Partition{TopicID: topic, Partition: int32(h.num(n))})
	}
	return ps
}

func (h *harness) num(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		h.t.Fatalf("bad number %q", s)
	}
	return n
}

func (h *harness) dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}
