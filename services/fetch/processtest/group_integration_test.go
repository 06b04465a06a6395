//go:build integration

package processtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/fetch"
)

// groupState is one DescribeGroup answer.
type groupState struct {
	asked   time.Time // when DescribeGroup was called
	at      time.Time // when the answer came
	members map[string]bool
	parts   map[int32]*sluicev1.GroupPartition
}

// owned returns the partitions leased to member, in order.
func (s groupState) owned(member string) []int32 {
	var out []int32
	for p, gp := range s.parts {
		if gp.GetOwner() == member {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// balanced: n live members hold every one of the partitions, partitions/n
// each (n divides partitions here).
func (s groupState) balanced(n, partitions int) bool {
	if len(s.members) != n || len(s.parts) != partitions {
		return false
	}
	for _, gp := range s.parts {
		if !s.members[gp.GetOwner()] {
			return false
		}
	}
	for m := range s.members {
		if len(s.owned(m)) != partitions/n {
			return false
		}
	}
	return true
}

func (s groupState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d members %v;", len(s.members), slices.Sorted(maps.Keys(s.members)))
	ps := make([]int32, 0, len(s.parts))
	for p := range s.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		gp := s.parts[p]
		live := ""
		if !s.members[gp.GetOwner()] {
			live = "(gone)"
		}
		fmt.Fprintf(&b, " p%d=%s%s@%d c=%d/%d", p, gp.GetOwner(), live, gp.GetEpoch(), gp.GetCommittedOffset(), gp.GetEndOffset())
	}
	return b.String()
}

// leaseKey is one lease epoch of one partition.
type leaseKey struct {
	partition int32
	epoch     int64
}

// groupWatch describes a group over and over from its run goroutine and
// checks every answer against the ones before: per partition the epoch and
// the committed offset never go down, one epoch has one owner, and nothing
// is committed past the end. The test's waits read its answers rather than
// asking themselves: DescribeGroup reads every partition's bounds, which is
// slow here (moto is shared), and answers must be checked in order anyway.
type groupWatch struct {
	admin sluicev1connect.AdminServiceClient
	group string

	// Owned by run.
	epoch     map[int32]int64
	committed map[int32]int64
	owner     map[leaseKey]string

	mu         sync.Mutex
	latest     groupState // the last answer
	lastErr    error      // the last failure, if any
	changed    chan struct{}
	violations []string
	samples    int
	took       time.Duration // all answers' latency
	slowest    time.Duration
}

func newGroupWatch(admin sluicev1connect.AdminServiceClient, group string) *groupWatch {
	return &groupWatch{admin: admin, group: group, epoch: map[int32]int64{}, committed: map[int32]int64{},
		owner: map[leaseKey]string{}, changed: make(chan struct{})}
}

// maxViolations bounds the violations a groupWatch keeps.
const maxViolations = 50

// run describes the group until ctx ends, starting a DescribeGroup at most
// every interval.
func (w *groupWatch) run(ctx context.Context, every time.Duration) {
	for {
		start := time.Now()
		w.describe(ctx)
		t := time.NewTimer(every - time.Since(start))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// describe takes and checks one answer, and publishes it.
func (w *groupWatch) describe(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	asked := time.Now()
	resp, err := w.admin.DescribeGroup(rctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: w.group}))
	if err != nil {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return
	}
	s := groupState{asked: asked, at: time.Now(), members: map[string]bool{}, parts: map[int32]*sluicev1.GroupPartition{}}
	for _, m := range resp.Msg.GetMembers() {
		s.members[m.GetMemberId()] = true
	}
	var bad []string
	violation := func(format string, args ...any) {
		bad = append(bad, s.at.Format("15:04:05.000: ")+fmt.Sprintf(format, args...))
	}
	for _, gp := range resp.Msg.GetPartitions() {
		p := gp.GetPartition()
		s.parts[p] = gp
		if e, ok := w.epoch[p]; ok && gp.GetEpoch() < e {
			violation("partition %d: epoch went down from %d to %d", p, e, gp.GetEpoch())
		}
		if c, ok := w.committed[p]; ok && gp.GetCommittedOffset() < c {
			violation("partition %d: committed offset went back from %d to %d", p, c, gp.GetCommittedOffset())
		}
		if end := gp.GetEndOffset(); end >= 0 && gp.GetCommittedOffset() > end {
			violation("partition %d: committed offset %d is past the end %d", p, gp.GetCommittedOffset(), end)
		}
		if o := gp.GetOwner(); o != "" {
			k := leaseKey{p, gp.GetEpoch()}
			if prev, ok := w.owner[k]; ok && prev != o {
				violation("partition %d: epoch %d owned by %s and by %s", p, gp.GetEpoch(), prev, o)
			}
			w.owner[k] = o
		}
		if e, ok := w.epoch[p]; !ok || gp.GetEpoch() > e {
			w.epoch[p] = gp.GetEpoch()
		}
		if c, ok := w.committed[p]; !ok || gp.GetCommittedOffset() > c {
			w.committed[p] = gp.GetCommittedOffset()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, bad[:min(len(bad), maxViolations-len(w.violations))]...)
	w.samples++
	w.took += s.at.Sub(asked)
	w.slowest = max(w.slowest, s.at.Sub(asked))
	w.latest = s
	close(w.changed)
	w.changed = make(chan struct{})
}

// report returns the answers checked, their mean and longest latency, and
// the violations seen.
func (w *groupWatch) report() (samples int, mean, slowest time.Duration, violations []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples > 0 {
		mean = w.took / time.Duration(w.samples)
	}
	return w.samples, mean, w.slowest, slices.Clone(w.violations)
}

// waitFor returns the first answer asked for after the call for which cond
// holds; it fails t after within.
func (w *groupWatch) waitFor(ctx context.Context, t *testing.T, within time.Duration, what string, cond func(groupState) bool) groupState {
	t.Helper()
	since := time.Now()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		w.mu.Lock()
		s, lastErr, changed := w.latest, w.lastErr, w.changed
		w.mu.Unlock()
		if !s.asked.Before(since) && cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("%s: not within %v; last state: %v; last DescribeGroup error: %v", what, within, s, lastErr)
		case <-ctx.Done():
			t.Fatalf("%s: %v; last state: %v", what, ctx.Err(), s)
		}
	}
}

// producer writes batches to the partitions in turn through the ingest
// copy's ProducerService until stopped, and remembers every acknowledged
// record.
type producer struct {
	client     sluicev1connect.ProducerServiceClient
	topic      string
	partitions int32
	batch      int
	every      time.Duration

	mu       sync.Mutex
	acked    map[po]string // the value acknowledged at each offset
	ackTimes []time.Time
	failures int
	lastErr  error
	bad      []string // answers that do not match the request
	perPart  map[int32]int

	stopOnce sync.Once
	stop     chan struct{} // closed: send no more
	done     chan struct{} // closed when the last answer is in
}

// startProducer starts producing; halt stops it. ctx bounds every call.
func startProducer(ctx context.Context, client sluicev1connect.ProducerServiceClient, topic string, partitions int32) *producer {
	p := &producer{client: client, topic: topic, partitions: partitions, batch: 8, every: 20 * time.Millisecond,
		acked: map[po]string{}, perPart: map[int32]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
	return p
}

func (p *producer) run(ctx context.Context) {
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	seq := 0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-tick.C:
		}
		part := int32(i) % p.partitions
		recs := make([]*sluicev1.Record, p.batch)
		for j := range recs {
			recs[j] = &sluicev1.Record{Value: fmt.Appendf(nil, "v-%08d", seq)}
			seq++
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := p.client.Produce(cctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: p.topic, Partition: &part, Records: recs}))
		cancel()
		now := time.Now()
		p.mu.Lock()
		switch {
		case err != nil:
			p.failures++
			p.lastErr = err
		case len(resp.Msg.GetResults()) != len(recs):
			p.bad = append(p.bad, fmt.Sprintf("%d results for %d records", len(resp.Msg.GetResults()), len(recs)))
		default:
			for j, r := range resp.Msg.GetResults() {
				if r.GetPartition() != part {
					p.bad = append(p.bad, fmt.Sprintf("record for partition %d acknowledged on %d", part, r.GetPartition()))
					continue
				}
				p.acked[po{part, r.GetOffset()}] = string(recs[j].GetValue())
			}
			p.ackTimes = append(p.ackTimes, now)
			p.perPart[part]++
		}
		p.mu.Unlock()
	}
}

// halt stops producing and waits for the last answer (every call is
// answered: none is cancelled, so every stored record was acknowledged
// unless the call failed).
func (p *producer) halt() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// results returns the records acknowledged, the answers that did not match
// their request, the calls that failed and the last failure.
func (p *producer) results() (acked map[po]string, bad []string, failures int, lastFailure error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acked), slices.Clone(p.bad), p.failures, p.lastErr
}

// everyPartition reports whether every partition has acknowledged a batch.
func (p *producer) everyPartition() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.perPart) == int(p.partitions)
}

// maxGap returns the longest time in [from, to] without an acknowledgement.
func (p *producer) maxGap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, gap := from, time.Duration(0)
	for _, at := range p.ackTimes {
		if at.Before(from) || at.After(to) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}

// members waits until each of procs prints, over a sliding window, records
// of exactly the partitions one live member of s's group holds, each its
// own member, and returns process name → member id, and the group state
// that matched. That ties a process to its member (the CLI shows no member
// id) and proves the process consumes all of its leases and nothing else.
func members(ctx context.Context, t *testing.T, w *groupWatch, out *printLog, since time.Time, procs ...*consumerProc) (map[string]string, groupState) {
	t.Helper()
	const window = 1500 * time.Millisecond
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := w.waitFor(ctx, t, 20*time.Second, "a DescribeGroup answer", func(groupState) bool { return true })
		from := s.asked.Add(-window)
		if from.Before(since) {
			from = since
		}
		got := map[string]string{}
		var why []string
		for _, p := range procs {
			parts := out.partitions(p.name, from, s.asked)
			for m := range s.members {
				if own := s.owned(m); len(own) > 0 && slices.Equal(own, parts) {
					got[p.name] = m
				}
			}
			if got[p.name] == "" {
				why = append(why, fmt.Sprintf("%s printed partitions %v", p.name, parts))
			}
		}
		distinct := map[string]bool{}
		for _, m := range got {
			distinct[m] = true
		}
		if len(got) == len(procs) && len(distinct) == len(procs) && s.asked.Sub(from) >= window {
			return got, s
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes not matched to members within 20 s: %v; group: %v", why, s)
		}
	}
}

// waitUntil polls cond every 50 ms; it fails t after within.
func waitUntil(ctx context.Context, t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRunning fails t if a consumer that should run has exited.
func checkRunning(t *testing.T, procs ...*consumerProc) {
	t.Helper()
	for _, p := range procs {
		if !p.running() {
			t.Fatalf("%s exited: %v; stderr:\n%s", p.name, p.err, tail(p.stderr.String(), 4000))
		}
	}
}

// ms rounds d for logs.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// leaseFenced returns the ErrorInfo of a Commit error saying the lease
// moved (FAILED_PRECONDITION, reason LEASE_FENCED), or nil for any other
// answer, an offset regression included (same code, other reason).
func leaseFenced(err error) *errdetails.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetReason() == fetch.ReasonLeaseFenced {
				return info
			}
		}
	}
	return nil
}
