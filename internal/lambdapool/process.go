package lambdapool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// backend is one running instance of a function: a process that serves
// the RIE's invoke API at Addr, one invocation at a time. The pool's
// seam: rieLauncher starts real RIE processes, the unit tests start
// httptest servers.
type backend interface {
	// Addr is the host:port of the invoke API.
	Addr() string
	// PID is the process id (the RIE's), for tests and logs.
	PID() int
	// Exited is closed once the process has exited.
	Exited() <-chan struct{}
	// Stop ends the process — SIGTERM, then SIGKILL after grace (at once
	// when grace is 0) — and waits for it and for its output. Any number
	// of calls; all return after the process is gone.
	Stop(grace time.Duration)
}

// launchFunc starts instance index of fn and returns it once it listens,
// or an error (the process, if any, stopped).
type launchFunc func(ctx context.Context, fn Function, index int) (backend, error)

// rieLauncher starts RIE processes.
type rieLauncher struct {
	rie          string
	region       string
	startTimeout time.Duration
	log          *slog.Logger
	// poolID and seq make every launch's envInstance marker unique.
	poolID string
	seq    atomic.Uint64
	ports  *portSet
}

func (l *rieLauncher) launch(ctx context.Context, fn Function, index int) (backend, error) {
	ports, err := l.ports.reserve(2)
	if err != nil {
		return nil, err
	}
	emulator := "127.0.0.1:" + strconv.Itoa(ports[0])
	runtimeAPI := "127.0.0.1:" + strconv.Itoa(ports[1])
	marker := fmt.Sprintf("%s/%s/%d/%d", l.poolID, fn.Name, index, l.seq.Add(1))
	cmd := exec.Command(l.rie,
		"--runtime-interface-emulator-address", emulator,
		"--runtime-api-address", runtimeAPI,
		fn.Bootstrap)
	// The RIE runs the bootstrap in its own working directory.
	cmd.Dir = filepath.Dir(fn.Bootstrap)
	cmd.Env = instanceEnv(os.Environ(), fn, l.region, marker)
	cmd.SysProcAttr = sysProcAttr()
	out := &lineLogger{log: l.log.With("function", fn.Name, "instance", index)}
	cmd.Stdout, cmd.Stderr = out, out
	// A bootstrap that outlives its RIE holds the output pipe: Wait gives
	// up on the pipe this long after the RIE exits.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		l.ports.release(ports)
		return nil, fmt.Errorf("start %s: %w", l.rie, err)
	}
	p := &process{cmd: cmd, addr: emulator, marker: marker, out: out, exited: make(chan struct{})}
	go func() { // owned by p: Stop waits for exited
		p.waitErr = cmd.Wait()
		l.ports.release(ports)
		close(p.exited)
	}()
	started := time.Now()
	if err := waitListening(ctx, p, l.startTimeout); err != nil {
		p.Stop(0)
		return nil, fmt.Errorf("instance %d of %s (pid %d, %s): %w", index, fn.Name, p.PID(), emulator, err)
	}
	l.log.Info("instance started", "function", fn.Name, "instance", index, "pid", p.PID(),
		"addr", emulator, "runtime_api", runtimeAPI, "took", time.Since(started).Round(time.Millisecond))
	return p, nil
}

// waitListening polls p's port until it accepts a connection. No probe
// invoke: that would run the user's code.
func waitListening(ctx context.Context, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			select {
			case <-p.exited: // someone else's listener on a port we picked
				return fmt.Errorf("exited during start-up: %v", p.waitErr)
			default:
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %v: %w", timeout, err)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited during start-up: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// instanceEnv is the environment of one instance: the pool's own, without
// AWS_LAMBDA_MAX_CONCURRENCY (it switches the RIE to a mode that only
// finds bootstraps under /var/task, /var/runtime and /opt), with the
// function's name, timeout and region, the instance marker, and fn.Env.
func instanceEnv(base []string, fn Function, region, marker string) []string {
	env := make([]string, 0, len(base)+len(fn.Env)+4)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !isReservedEnv(k) {
			env = append(env, kv)
		}
	}
	env = append(env,
		"AWS_LAMBDA_FUNCTION_NAME="+fn.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(fn.Timeout/time.Second)),
		"AWS_REGION="+region,
		envInstance+"="+marker)
	// Later entries win in exec: fn.Env overrides the pool's environment.
	return append(env, fn.Env...)
}

// process is one RIE process.
type process struct {
	cmd    *exec.Cmd
	addr   string
	marker string
	out    *lineLogger
	// exited is closed after cmd.Wait returned (waitErr set).
	exited  chan struct{}
	waitErr error

	stopOnce sync.Once
}

func (p *process) Addr() string            { return p.addr }
func (p *process) PID() int                { return p.cmd.Process.Pid }
func (p *process) Exited() <-chan struct{} { return p.exited }

func (p *process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		// os.Process signals through a pidfd: never a recycled pid.
		if grace > 0 {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			select {
			case <-p.exited:
			case <-t.C:
			}
			t.Stop()
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
		// The RIE starts the bootstrap in a process group of its own, and
		// a killed RIE leaves it running until its current invocation
		// ends: find it by the marker the RIE forwarded to it.
		killMarked(envInstance + "=" + p.marker)
		p.out.flush()
	})
	<-p.exited
}

// portSet hands out free loopback ports and remembers those its instances
// hold, so that two instances of one pool never pick the same port (a
// port picked by listening on :0 is free only until someone binds it).
type portSet struct {
	mu   sync.Mutex
	held map[int]bool
}

func newPortSet() *portSet { return &portSet{held: map[int]bool{}} }

// reserve returns n distinct free ports, held until release.
func (s *portSet) reserve(n int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100 {
			return nil, errors.New("no free loopback port after 100 tries")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		lns = append(lns, ln) // held open until all n are picked: distinct
		port := ln.Addr().(*net.TCPAddr).Port
		if !s.held[port] {
			ports = append(ports, port)
		}
	}
	for _, p := range ports {
		s.held[p] = true
	}
	return ports, nil
}

func (s *portSet) release(ports []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ports {
		delete(s.held, p)
	}
}

// maxLineBytes bounds one logged line of a function's output; a longer
// line is logged in pieces.
const maxLineBytes = 16 << 10

// lineLogger logs a process's output, one record per line. exec calls
// Write from one goroutine at a time (Stdout and Stderr are the same
// writer); flush runs after that goroutine ended.
type lineLogger struct {
	log *slog.Logger
	buf []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := maxLineBytes - len(l.buf)
			if len(b) < room {
				l.buf = append(l.buf, b...)
				return n, nil
			}
			l.buf = append(l.buf, b[:room]...)
			b = b[room:]
			l.flush()
			continue
		}
		l.buf = append(l.buf, b[:i]...)
		b = b[i+1:]
		l.flush()
	}
	return n, nil
}

func (l *lineLogger) flush() {
	if len(l.buf) > maxLineBytes {
		l.buf = l.buf[:maxLineBytes]
	}
	if line := strings.TrimRight(string(l.buf), "\r"); line != "" {
		l.log.Info("function output", "line", line)
	}
	l.buf = l.buf[:0]
}
