package fault

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
	"github.com/sluicemq/sluice/harness/bookieproc"
)

// ErrBudget is returned once an Injector has injected its MaxFaults.
var ErrBudget = errors.New("fault: budget of injections used up")

// DefaultMaxFaults bounds the injections of one Injector when the caller
// sets none: a scenario of a few minutes injects tens, not thousands.
const DefaultMaxFaults = 500

// Injector injects faults into the harness's processes and links and
// records each in the history. It is safe for concurrent use.
type Injector struct {
	rec *history.Recorder
	max int

	mu     sync.Mutex
	n      int            // injections so far (heals and resumes count too)
	byName map[string]int // per fault name
	paused map[*bookieproc.Proc]bool
}

// NewInjector records into rec and allows at most maxFaults injections
// (0: DefaultMaxFaults).
func NewInjector(rec *history.Recorder, maxFaults int) *Injector {
	if maxFaults <= 0 {
		maxFaults = DefaultMaxFaults
	}
	return &Injector{rec: rec, max: maxFaults, byName: map[string]int{}, paused: map[*bookieproc.Proc]bool{}}
}

// Count returns the injections so far, and per fault name.
func (in *Injector) Count() (int, map[string]int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.byName))
	for k, v := range in.byName {
		out[k] = v
	}
	return in.n, out
}

// Do runs f as one injection named name on target, within the budget, and
// records it (with its error, if it failed): for faults this package does
// not know, such as pausing an in-process client.
func (in *Injector) Do(name, target string, f func() error) error { return in.do(name, target, f) }

// do runs one injection within the budget and records it (with its error,
// if it failed). The history write's own failure is returned too: a run
// whose history lost a line proves nothing.
func (in *Injector) do(name, target string, f func() error) error {
	in.mu.Lock()
	if in.n >= in.max {
		in.mu.Unlock()
		return fmt.Errorf("%w (%d): %s %s", ErrBudget, in.max, name, target)
	}
	in.n++
	in.byName[name]++
	in.mu.Unlock()
	err := f()
	op := history.Op{Kind: history.Fault, FaultName: name, Target: target}
	if err != nil {
		op.Error = err.Error()
	}
	if rerr := in.rec.Record(op); rerr != nil {
		return errors.Join(err, fmt.Errorf("record fault: %w", rerr))
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, target, err)
	}
	return nil
}

// Kill sends SIGKILL to p and waits until it is gone.
func (in *Injector) Kill(p *bookieproc.Proc) error {
	return in.do("kill", p.ID, func() error {
		in.forgetPause(p)
		return p.Kill()
	})
}

// Lose kills p and deletes its data directory: a machine lost for good.
// It is never restarted.
func (in *Injector) Lose(p *bookieproc.Proc) error {
	return in.do("lose", p.ID, func() error {
		in.forgetPause(p)
		if err := p.Kill(); err != nil {
			return err
		}
		if p.Dir == "" {
			return fmt.Errorf("lose %s: it has no data directory", p.ID)
		}
		return os.RemoveAll(p.Dir)
	})
}

// Restart starts p again (same id, address and data directory) and waits
// until it listens.
func (in *Injector) Restart(p *bookieproc.Proc) error {
	return in.do("restart", p.ID, p.Start)
}

// Pause sends SIGSTOP to p: it keeps its sockets and state but runs no
// code (its leases, heartbeats and sessions lapse) until Resume.
func (in *Injector) Pause(p *bookieproc.Proc) error {
	return in.do("pause", p.ID, func() error {
		if err := signal(p, syscall.SIGSTOP); err != nil {
			return err
		}
		in.mu.Lock()
		in.paused[p] = true
		in.mu.Unlock()
		return nil
	})
}

// Resume sends SIGCONT to a process Pause stopped.
func (in *Injector) Resume(p *bookieproc.Proc) error {
	return in.do("resume", p.ID, func() error {
		in.forgetPause(p)
		return signal(p, syscall.SIGCONT)
	})
}

// ResumeAll continues every process still paused (healing before the
// drain, and before the harness stops processes: a stopped process handles
// SIGTERM only once continued).
func (in *Injector) ResumeAll() error {
	in.mu.Lock()
	var ps []*bookieproc.Proc
	for p := range in.paused {
		ps = append(ps, p)
	}
	in.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, in.Resume(p))
	}
	return errors.Join(errs...)
}

func (in *Injector) forgetPause(p *bookieproc.Proc) {
	in.mu.Lock()
	delete(in.paused, p)
	in.mu.Unlock()
}

// Cut closes the link's connections and refuses new ones.
func (in *Injector) Cut(p *Proxy) error {
	return in.do("cut", p.Name(), func() error { p.Set(Cut); return nil })
}

// Blackhole holds the link's connections silent.
func (in *Injector) Blackhole(p *Proxy) error {
	return in.do("blackhole", p.Name(), func() error { p.Set(Blackhole); return nil })
}

// Heal lets the link pass again.
func (in *Injector) Heal(p *Proxy) error {
	return in.do("heal", p.Name(), func() error { p.Set(Pass); return nil })
}

// CutFrom cuts the link between one source process (see Proxy.Identify)
// and p's target; every other peer still gets through.
func (in *Injector) CutFrom(p *Proxy, src string) error {
	return in.do("cut", src+"->"+p.Name(), func() error { p.SetFrom(src, Cut); return nil })
}

// BlackholeFrom holds the link between one source process and p's target
// silent.
func (in *Injector) BlackholeFrom(p *Proxy, src string) error {
	return in.do("blackhole", src+"->"+p.Name(), func() error { p.SetFrom(src, Blackhole); return nil })
}

// MuteFrom passes one source process's requests through p but drops the
// answers: the target does the work and the source never hears of it.
// Follow it with CutFrom or HealFrom, which close the torn connections.
func (in *Injector) MuteFrom(p *Proxy, src string) error {
	return in.do("mute", src+"->"+p.Name(), func() error { p.SetFrom(src, Mute); return nil })
}

// HealFrom lets one source process's link through p pass again.
func (in *Injector) HealFrom(p *Proxy, src string) error {
	return in.do("heal", src+"->"+p.Name(), func() error { p.SetFrom(src, Pass); return nil })
}

// Note records a harness event that is not an injection (a lease taken
// over, a phase starting) so the history reads as a timeline. It does not
// count against the budget.
func (in *Injector) Note(what, target string) error {
	return in.rec.Record(history.Op{Kind: history.Fault, FaultName: what, Target: target})
}

// signal sends sig to p's process, which must be running.
func signal(p *bookieproc.Proc, sig syscall.Signal) error { return p.Signal(sig) }

// Sleep waits d or until stop closes; it reports whether d passed. Every
// fault loop waits with it, so stopping a scenario is prompt.
func Sleep(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
