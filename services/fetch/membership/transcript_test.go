package membership

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/transcript"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/services/fetch/assign"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt transcripts")

// TestTranscripts runs every testdata/*.txt transcript: blocks of one
// command, a "----" line and the actions (or error) it must produce,
// separated by blank lines; lines starting with # are comments. This is
// bookkeeper/ledger's format (trigger's run.transcript is one scenario
// table in Go, which suits a machine with one input; this one has many).
// Run `go test ./services/fetch/membership -run Transcripts -rewrite` to
// regenerate the expected output after a deliberate change, and review
// the diff.
//
// The harness keeps a clock, starting at 0s; events that carry a time
// take it from there, and an answer's Sent is when its request was
// emitted. Partitions are written topic/partition.
//
//	member id=m1 topics=t,u [timeout=9s] [revoke=3s] [acquire=N] [release=N]
//	advance D                           move the clock
//	joined | join-failed                answer a Join (the first, or SendJoin)
//	tick
//	heartbeat-ok | heartbeat-failed | forgotten
//	members m1:t,u m2:t                 the live members and their topics
//	members-failed
//	view t partitions=N [p:owner@epoch[/offset] ...]   owner - is free
//	view-failed t
//	acquired t/0 e=E at=O | held t/0 | acquire-failed t/0
//	revoke-done t/0
//	advance-next t/0 e=E FROM->TO       the owner's position moved
//	leave
//	state                               phase, liveness, leases
func TestTranscripts(t *testing.T) {
	transcript.Files(t, "testdata/*.txt", *rewrite, "(no actions)", func(t *testing.T) func(string) []string {
		h := &harness{}
		return func(cmd string) []string {
			out := h.run(cmd)
			if h.m != nil {
				if err := h.m.check(); err != nil {
					t.Errorf("%s: invariant broken: %v", cmd, err)
				}
			}
			return out
		}
	})
}

// harness holds the machine a transcript drives and its clock.
type harness struct {
	m    *Member
	now  time.Time
	sent time.Time // when the last SendHeartbeat or SendJoin was emitted
}

func (h *harness) run(cmd string) []string {
	f := strings.Fields(cmd)
	switch f[0] {
	case "member":
		if err := h.create(f[1:]); err != nil {
			return []string{"error: " + err.Error()}
		}
		return nil
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		h.now = h.now.Add(d)
		return []string{"now " + clock(h.now)}
	case "state":
		return h.state()
	}
	if h.m == nil {
		return []string{"error: no machine: start with member"}
	}
	ev, err := h.event(f[0], f[1:])
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	acts, err := h.m.Step(ev)
	var out []string
	for _, a := range acts {
		switch a.(type) {
		case SendHeartbeat, SendJoin:
			h.sent = h.now
		}
		out = append(out, a.String())
	}
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func (h *harness) create(args []string) error {
	kv := keyValues(args)
	cfg := Config{MemberID: kv["id"], Topics: strings.Split(kv["topics"], ","), SessionTimeout: 9 * time.Second, RevokeTimeout: 3 * time.Second}
	if v, ok := kv["timeout"]; ok {
		cfg.SessionTimeout = duration(v)
	}
	if v, ok := kv["revoke"]; ok {
		cfg.RevokeTimeout = duration(v)
	}
	cfg.Assign = assign.Config{MaxAcquirePerRound: atoi(kv["acquire"]), MaxReleasePerRound: atoi(kv["release"])}
	m, err := New(cfg)
	if err != nil {
		return err
	}
	*h = harness{m: m, now: time.Unix(0, 0)}
	return nil
}

var errStore = errors.New("store unavailable")

func (h *harness) event(name string, a []string) (Event, error) {
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch name {
	case "joined":
		return Joined{Sent: h.sentOrNow(), Now: h.now}, nil
	case "join-failed":
		return JoinFailed{Err: errStore, Now: h.now}, nil
	case "tick":
		return Tick{Now: h.now}, nil
	case "heartbeat-ok":
		return HeartbeatOK{Sent: h.sentOrNow(), Now: h.now}, nil
	case "heartbeat-failed":
		return HeartbeatFailed{Err: errStore, Now: h.now}, nil
	case "forgotten":
		return MemberForgotten{}, nil
	case "members":
		var ev MembersListed
		for _, s := range a {
			id, topics, _ := strings.Cut(s, ":")
			ev.Members = append(ev.Members, bookkeeping.Member{ID: id, Topics: strings.Split(topics, ",")})
		}
		return ev, nil
	case "members-failed":
		return MembersFailed{Err: errStore}, nil
	case "view":
		ev := TopicView{Topic: arg(0), Now: h.now}
		for _, s := range a[1:] {
			if n, ok := strings.CutPrefix(s, "partitions="); ok {
				ev.Partitions = int32(atoi(n))
				continue
			}
			ev.Leases = append(ev.Leases, parseStored(s))
		}
		return ev, nil
	case "view-failed":
		return TopicFailed{Topic: arg(0), Err: errStore}, nil
	case "acquired":
		kv := keyValues(a[1:])
		return LeaseAcquired{Key: key(arg(0)), Epoch: int64(atoi(kv["e"])), Offset: int64(atoi(kv["at"]))}, nil
	case "held":
		return AcquireHeld{Key: key(arg(0))}, nil
	case "acquire-failed":
		return AcquireFailed{Key: key(arg(0)), Err: errStore}, nil
	case "revoke-done":
		return RevokeDone{Key: key(arg(0))}, nil
	case "advance-next":
		kv := keyValues(a[1:2])
		from, to, _ := strings.Cut(arg(2), "->")
		return Advance{Key: key(arg(0)), Epoch: int64(atoi(kv["e"])), From: int64(atoi(from)), To: int64(atoi(to))}, nil
	case "leave":
		return Leave{}, nil
	}
	return nil, fmt.Errorf("unknown command %q", name)
}

func (h *harness) sentOrNow() time.Time {
	if h.sent.IsZero() {
		return h.now
	}
	s := h.sent
	h.sent = time.Time{}
	return s
}

func (h *harness) state() []string {
	m := h.m
	if m == nil {
		return []string{"state: none"}
	}
	out := []string{fmt.Sprintf("state: %v live=%v last-beat=%s beat-base=%s", m.phase, m.Live(h.now), clock(m.lastBeat), clock(m.beatBase))}
	for _, k := range slices.SortedFunc(maps.Keys(m.leases), compareKeys) {
		l := m.leases[k]
		s := fmt.Sprintf("  %v e%d next=%d", k, l.epoch, l.next)
		if l.revoking {
			s += " revoking until " + clock(l.deadline)
		} else {
			s += " followed"
		}
		out = append(out, s)
	}
	return out
}

// parseStored reads "p:owner@epoch[/offset]" (owner - is free).
func parseStored(s string) bookkeeping.Lease {
	p, rest, _ := strings.Cut(s, ":")
	owner, rest, _ := strings.Cut(rest, "@")
	if owner == "-" {
		owner = ""
	}
	epoch, offset, hasOffset := strings.Cut(rest, "/")
	l := bookkeeping.Lease{Partition: int32(atoi(p)), Owner: owner, Epoch: int64(atoi(epoch)), Offset: bookkeeping.NoOffset}
	if hasOffset {
		l.Offset = int64(atoi(offset))
	}
	return l
}

func key(s string) Key {
	topic, p, _ := strings.Cut(s, "/")
	return Key{Topic: topic, Partition: int32(atoi(p))}
}

func keyValues(args []string) map[string]string {
	kv := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		kv[k] = v
	}
	return kv
}

func duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("bad duration %q", s))
	}
	return d
}

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
