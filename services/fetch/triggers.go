package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/membership"
	"github.com/sluicemq/sluice/services/fetch/partlog"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// The trigger runtime (docs/DESIGN.md, "Triggers"; issue 22). Every fetch
// copy with a Lambda client (Deps.Lambda) and the catalog's triggers
// (Deps.Triggers) runs every enabled trigger as a member of the trigger's
// own consumer group, TriggerGroup: the group's leases spread the
// trigger's partitions over the copies, move them when a copy ends or
// dies, and fence a copy that lost one (its commits fail). For each lease
// it holds, a copy runs a triggerWorker (trigger_worker.go).
//
// triggerHost watches the catalog (every Config.TriggerRefresh) and keeps
// one triggerRunner per enabled trigger whose topic is still the
// incarnation it was created on; a changed trigger (new version) gets a
// new runner, which joins the group as a new member.

// TriggerGroupPrefix starts the group names of triggers; Subscribe and
// Commit refuse groups with it (they are the runtime's).
const TriggerGroupPrefix = "__trigger."

// TriggerGroup is the consumer group a trigger runs as:
// "__trigger.<name>.<creation time, ms>". The creation time names the
// trigger's incarnation: an update keeps the group (and where the trigger
// stands), while a trigger deleted and created again under the same name
// starts afresh from its starting position instead of at the old one's
// offsets.
func TriggerGroup(tr catalog.Trigger) string {
	return TriggerGroupPrefix + tr.Name + "." + strconv.FormatInt(tr.CreatedAt.UnixMilli(), 10)
}

// Defaults of the trigger runtime.
const (
	DefaultTriggerRefresh        = 2 * time.Second
	DefaultTriggerSessionTimeout = 10 * time.Second
	// triggerStopGrace is how long a stopping runner lets its workers
	// finish the invocation in flight (and commit it) before canceling it.
	triggerStopGrace = 10 * time.Second
)

// ProducerClient is what the runtime needs to send records to a trigger's
// on_failure_topic: ProducerService's unary Produce (an ingest copy).
type ProducerClient interface {
	Produce(context.Context, *connect.Request[sluicev1.ProduceRequest]) (*connect.Response[sluicev1.ProduceResponse], error)
}

// triggerHost is the copy's trigger runtime.
type triggerHost struct {
	invoker *trigger.Invoker
	dlq     ProducerClient
	meters  *triggerMeters
	tracer  triggerTracer // a span per invocation (trigger_tracing.go)
	cat     catalog.Triggers

	// mu guards runners; a leaf (a runner's start, called under it,
	// takes no lock).
	mu      sync.Mutex
	runners map[string]*triggerRunner
}

// triggerRunner runs one trigger (one version of it) on this copy.
type triggerRunner struct {
	s     *Service
	tr    catalog.Trigger
	spec  catalog.TriggerSpec // defaults resolved
	group string
	m     *member
	enc   *trigger.Encoder
	pol   trigger.RetryPolicy

	cancelMember context.CancelFunc // ends the membership (coordination)
	workCtx      context.Context    // the workers'; canceled after the grace
	cancelWork   context.CancelFunc
	done         chan struct{} // closed when the runner left the group

	// mu guards workers; taken under member.mu (follow), and under it
	// only a worker's halt (a sync.Once) runs.
	mu      sync.Mutex
	workers map[int32]*triggerWorker
	wg      sync.WaitGroup
}

type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

func (r *triggerRunner) rnd() trigger.Rand { return globalRand{} }

// runTriggers keeps the runners in line with the catalog until ctx ends,
// then stops them all.
func (s *Service) runTriggers(ctx context.Context) {
	h := s.triggers
	t := time.NewTicker(s.cfg.TriggerRefresh)
	defer t.Stop()
	for {
		if err := s.reconcileTriggers(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("listing triggers failed; retrying", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			h.mu.Lock()
			runners := h.runners
			h.runners = map[string]*triggerRunner{}
			h.mu.Unlock()
			var wg sync.WaitGroup
			for _, r := range runners {
				wg.Go(r.stop)
			}
			wg.Wait()
			return
		case <-t.C:
		}
	}
}

// reconcileTriggers starts, restarts and stops runners after the catalog.
func (s *Service) reconcileTriggers(ctx context.Context) error {
	h := s.triggers
	want := map[string]catalog.Trigger{}
	token := ""
	for {
		page, err := h.cat.ListTriggers(ctx, token, catalog.MaxPageSize)
		if err != nil {
			return err
		}
		for _, tr := range page.Items {
			if !tr.Enabled {
				continue
			}
			t, err := s.topic(ctx, tr.Topic)
			if errors.Is(err, catalog.ErrNotFound) || (err == nil && t.ID != tr.TopicID) {
				continue // its topic is gone: DescribeTrigger says so
			}
			if err != nil {
				s.log.Warn("trigger's topic cannot be read; not starting it this round", slog.String("trigger", tr.Name), slog.Any("err", err))
				h.mu.Lock()
				if r, ok := h.runners[tr.Name]; ok {
					want[tr.Name] = r.tr // keep what runs
				}
				h.mu.Unlock()
				continue
			}
			want[tr.Name] = tr
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	h.mu.Lock()
	var stop []*triggerRunner
	for name, r := range h.runners {
		if tr, ok := want[name]; !ok || tr.Version != r.tr.Version || !tr.CreatedAt.Equal(r.tr.CreatedAt) {
			stop = append(stop, r)
			delete(h.runners, name)
		}
	}
	h.mu.Unlock()
	for _, r := range stop {
		s.log.Info("stopping trigger runner", slog.String("trigger", r.tr.Name), slog.Int64("version", r.tr.Version))
		r.stop()
	}
	for name, tr := range want {
		h.mu.Lock()
		_, running := h.runners[name]
		h.mu.Unlock()
		if running {
			continue
		}
		r, err := s.newTriggerRunner(tr)
		if err != nil {
			s.log.Error("trigger cannot run", slog.String("trigger", name), slog.Any("err", err))
			continue
		}
		h.mu.Lock()
		if ctx.Err() == nil {
			h.runners[name] = r
			r.start()
		}
		h.mu.Unlock()
	}
	return nil
}

func (s *Service) newTriggerRunner(tr catalog.Trigger) (*triggerRunner, error) {
	spec := tr.WithDefaults()
	enc, err := trigger.NewEncoder(s.cfg.TriggerBootstrapServers, spec.BatchSize, spec.MaxBatchBytes)
	if err != nil {
		return nil, err
	}
	pol := trigger.PolicyOf(spec)
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	r := &triggerRunner{s: s, tr: tr, spec: spec, group: TriggerGroup(tr), enc: enc, pol: pol,
		done: make(chan struct{}), workers: map[int32]*triggerWorker{}}
	start := sluicev1.StartPosition_START_POSITION_LATEST
	switch spec.StartingPosition {
	case catalog.StartEarliest:
		start = sluicev1.StartPosition_START_POSITION_EARLIEST
	case catalog.StartTimestamp:
		start = sluicev1.StartPosition_START_POSITION_TIMESTAMP
	}
	r.m = &member{}
	s.initMember(r.m, r.group, s.routedID("t-"), []string{tr.Topic}, s.cfg.TriggerSessionTimeout)
	r.m.start, r.m.startMs = start, spec.StartingTimestampMs
	r.m.info = fmt.Sprintf("trigger %s v%d on %s", tr.Name, tr.Version, s.copyName())
	r.m.hooks = memberHooks{follow: r.follow, changed: func(membership.Announce) {}}
	return r, nil
}

// copyName names this copy in member infos.
func (s *Service) copyName() string {
	if s.cfg.Address != "" {
		return s.cfg.Address
	}
	return "this fetch copy"
}

// start joins the group and runs the member in the background.
func (r *triggerRunner) start() {
	s := r.s
	mctx, cancel := context.WithCancel(s.ctx)
	r.m.ctx, r.cancelMember = mctx, cancel
	r.workCtx, r.cancelWork = context.WithCancel(s.ctx)
	go func() {
		defer close(r.done)
		for attempt := 1; ; attempt++ {
			err := r.m.join(mctx)
			if err == nil {
				break
			}
			if mctx.Err() != nil {
				return
			}
			s.log.Warn("trigger runner cannot join its group; retrying", slog.String("trigger", r.tr.Name), slog.Any("err", err))
			select {
			case <-mctx.Done():
				return
			case <-time.After(min(time.Duration(attempt)*time.Second, 10*time.Second)):
			}
		}
		s.log.Info("trigger runner started", slog.String("trigger", r.tr.Name), slog.Int64("version", r.tr.Version),
			slog.String("group", r.group), slog.String("member", r.m.memberID), slog.String("function", r.spec.Function))
		_ = r.m.coordinate()
		// Stopping: workers finish the invocation in flight and commit it
		// (within the grace), then the member leaves so its leases are
		// free at once.
		r.mu.Lock()
		for _, w := range r.workers {
			w.halt()
		}
		r.mu.Unlock()
		waited := make(chan struct{})
		go func() { r.wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(triggerStopGrace):
			r.cancelWork()
			<-waited
		}
		r.cancelWork()
		r.m.leave()
	}()
}

// stop ends the runner and waits until it left the group.
func (r *triggerRunner) stop() {
	r.cancelMember()
	<-r.done
}

// follow is the member's hook for a new lease: a worker starts on it.
// Under member.mu.
func (r *triggerRunner) follow(l membership.Lease) func() {
	w := &triggerWorker{r: r, partition: l.Partition, epoch: l.Epoch, next: l.Offset,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), status: partitionRunning, committed: -1}
	r.mu.Lock()
	if old, ok := r.workers[l.Partition]; ok {
		old.halt() // a previous epoch's worker still finishing: it is fenced
	}
	r.workers[l.Partition] = w
	r.mu.Unlock()
	r.wg.Add(1)
	go w.run(r.workCtx)
	return w.halt
}

// workerDone forgets an ended worker.
func (r *triggerRunner) workerDone(w *triggerWorker) {
	r.mu.Lock()
	if r.workers[w.partition] == w {
		delete(r.workers, w.partition)
	}
	r.mu.Unlock()
	r.wg.Done()
}

// TriggerStatus describes a trigger's runtime state for
// AdminService.DescribeTrigger: the members of its group, and per
// partition the lease, committed offset, lag and the state and last error
// its owner committed (this copy's own workers answer live).
func (s *Service) TriggerStatus(ctx context.Context, tr catalog.Trigger) (*sluicev1.DescribeTriggerResponse, error) {
	group := TriggerGroup(tr)
	resp := &sluicev1.DescribeTriggerResponse{Group: group}
	members, err := s.d.Bookkeeping.ListMembers(ctx, group)
	if err != nil {
		return nil, bookkeepingErr(err)
	}
	var running []bookkeeping.Member
	for _, m := range members {
		if slices.Contains(m.Topics, tr.Topic) {
			running = append(running, m)
		}
	}
	resp.Members = int32(len(running))
	t, terr := s.topic(ctx, tr.Topic)
	topicGone := errors.Is(terr, catalog.ErrNotFound) || (terr == nil && t.ID != tr.TopicID)
	leases, err := s.d.Bookkeeping.ListLeases(ctx, group, tr.Topic)
	if err != nil {
		return nil, bookkeepingErr(err)
	}
	if terr == nil && !topicGone {
		forgetOtherIncarnations(leases, t)
	}
	live := s.liveTriggerPartitions(tr)
	stopped := 0
	var lagged []int // indexes in resp.Partitions of the partitions whose lag is looked up
	for _, l := range leases {
		if l.Owner == "" && l.Offset == bookkeeping.NoOffset {
			continue
		}
		tp := &sluicev1.TriggerPartition{Partition: l.Partition, Owner: l.Owner, Epoch: l.Epoch, CommittedOffset: l.Offset, EndOffset: -1, Lag: -1}
		var md triggerMetadata
		if l.Metadata != "" && json.Unmarshal([]byte(l.Metadata), &md) == nil {
			tp.State, tp.LastError, tp.LastErrorAtMs = md.Status, md.LastError, md.LastErrAt
		}
		if w, ok := live[l.Partition]; ok && w.epoch == l.Epoch {
			w.mu.Lock()
			tp.State, tp.LastError = w.status, w.lastErr
			if !w.lastErrAt.IsZero() {
				tp.LastErrorAtMs = w.lastErrAt.UnixMilli()
			}
			w.mu.Unlock()
		}
		if l.Owner == "" {
			tp.State = ""
		}
		if tp.State == partitionStopped {
			stopped++
		}
		if terr == nil && !topicGone && int(l.Partition) < t.Partitions {
			lagged = append(lagged, len(resp.Partitions))
		}
		resp.Partitions = append(resp.Partitions, tp)
	}
	s.lagBounds(ctx, len(lagged), func(i int) (string, int32, int64) {
		tp := resp.Partitions[lagged[i]]
		return tr.Topic, tp.Partition, tp.CommittedOffset
	}, func(i int, b partlog.LagBounds) {
		tp := resp.Partitions[lagged[i]]
		tp.EndOffset = b.End
		if tp.CommittedOffset >= 0 {
			tp.Lag = max(b.End-tp.CommittedOffset, 0)
		}
	})
	info := &sluicev1.TriggerInfo{}
	switch {
	case !tr.Enabled:
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_DISABLED, "disabled: stored, not run"
	case topicGone:
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_TOPIC_DELETED,
			fmt.Sprintf("topic %q was deleted (or re-created as a new topic) after the trigger was created: delete the trigger and create it again", tr.Topic)
	case len(running) == 0:
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_NOT_RUNNING,
			"enabled, but no fetch copy runs it yet (copies pick up changes within seconds; is a fetch copy with a Lambda endpoint up?)"
	case stopped > 0:
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_STOPPED,
			fmt.Sprintf("%d partition(s) stopped on a failure (no on_failure_topic): see their last_error; update the trigger to go on", stopped)
	default:
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_RUNNING, "running on "+trigger.Plural(len(running), "fetch copy")
	}
	resp.Trigger = info
	return resp, nil
}

// liveTriggerPartitions are this copy's workers of a trigger's current
// version.
func (s *Service) liveTriggerPartitions(tr catalog.Trigger) map[int32]*triggerWorker {
	out := map[int32]*triggerWorker{}
	if s.triggers == nil {
		return out
	}
	s.triggers.mu.Lock()
	r := s.triggers.runners[tr.Name]
	s.triggers.mu.Unlock()
	if r == nil || r.tr.Version != tr.Version || !r.tr.CreatedAt.Equal(tr.CreatedAt) {
		return out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, w := range r.workers {
		out[p] = w
	}
	return out
}
