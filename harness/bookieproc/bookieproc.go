// Package bookieproc starts `sluice bookie` processes on loopback for tests
// and benchmarks that need real processes: kill -9 tests, the ledger
// benchmark, the chaos harness. Every process it starts is owned by a Proc
// that stops it (SIGTERM, then SIGKILL after a deadline) and waits for it.
//
// It is test support (harness/README.md): tests, the ledger benchmark and
// chaos/ import it; nothing the services run does.
package bookieproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Build compiles the sluice binary into dir and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := dir + "/sluice"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluicemq/sluice/cmd/sluice")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback address that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Proc is one sluice process (restartable on the same id, address and
// dir): a bookie by default, or any other `sluice` command when Command is
// set (then Args are all its flags, and Dir and ID are not passed).
type Proc struct {
	ID, Addr, Dir string
	Bin           string
	Args          []string // extra `sluice bookie` flags, or Command's flags
	Command       string   // "" = bookie
	Env           []string // extra environment (KEY=value), added to the test's

	// pid is the last started process's, readable while Start holds mu
	// (a proxy identifying the process's connections during its start).
	pid atomic.Int64

	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *lockedBuffer
	past   string // earlier runs' output (tail)
	exited chan struct{}
}

// lockedBuffer collects a process's output (written by exec's copying
// goroutine) so Log can read it meanwhile.
type lockedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	watchers []watcher
}

// watcher is one Watch: ch is closed by the first write containing text.
type watcher struct {
	text []byte
	ch   chan struct{}
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 4<<20 { // keep the last few MiB at most
		b.buf.Next(b.buf.Len() - 2<<20)
	}
	kept := b.watchers[:0]
	for _, w := range b.watchers {
		// The commands print a line per write, so a line is never split
		// across two.
		if bytes.Contains(p, w.text) {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	b.watchers = kept
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs the process and waits until it listens (up to 30 s).
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	args := append([]string{"bookie", "--dir", p.Dir, "--addr", p.Addr, "--id", p.ID, "--instance", "sluice-test"}, p.Args...)
	if p.Command != "" {
		args = append([]string{p.Command}, p.Args...)
	}
	if p.log != nil { // keep the previous run's output for AllLogs
		p.past += p.log.String() + fmt.Sprintf("\n=== %s restarted at %s ===\n", p.ID, time.Now().UTC().Format(time.RFC3339Nano))
		if len(p.past) > maxPastLog {
			p.past = p.past[len(p.past)-maxPastLog:]
		}
	}
	p.log = new(lockedBuffer)
	p.cmd = exec.Command(p.Bin, args...)
	p.cmd.Env = append(os.Environ(), p.Env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.pid.Store(int64(p.cmd.Process.Pid))
	exited := make(chan struct{})
	p.exited = exited
	cmd := p.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	if p.Addr == "" {
		// A client process (no listener): started once it did not exit
		// at once.
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", p.ID, p.log)
		case <-time.After(200 * time.Millisecond):
			return nil
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", p.ID, p.log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after 30s:\n%s", p.ID, p.Addr, p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the process to die.
func (p *Proc) Kill() error { return p.signal(syscall.SIGKILL, time.Minute) }

// Stop sends SIGTERM and waits (SIGKILL after 10 s). Safe to call when not
// running.
func (p *Proc) Stop() error { return p.signal(syscall.SIGTERM, 10*time.Second) }

func (p *Proc) signal(sig syscall.Signal, wait time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// Signal sends sig to the process if it is running (SIGSTOP/SIGCONT for
// pauses) and does not wait. It never signals a pid the process no longer
// owns: after the process exited it returns os.ErrProcessDone.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s was never started", p.ID)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s: %w", p.ID, os.ErrProcessDone)
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Pid is the id of the process last started (0 if none), without waiting
// for a Start in progress.
func (p *Proc) Pid() int { return int(p.pid.Load()) }

// maxPastLog bounds the output of earlier runs that AllLogs keeps.
const maxPastLog = 8 << 20

// AllLogs returns what every run of the process printed (the tail of the
// earlier ones, then the current one).
func (p *Proc) AllLogs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return p.past
	}
	return p.past + p.log.String()
}

// Watch returns a channel closed when the running process next prints a
// write containing text (a line), for faults aimed at a moment the
// process announces. It is never closed if the process is restarted
// before that.
func (p *Proc) Watch(text string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.log == nil {
		return ch
	}
	p.log.mu.Lock()
	p.log.watchers = append(p.log.watchers, watcher{text: []byte(text), ch: ch})
	p.log.mu.Unlock()
	return ch
}

// Log returns what the process printed so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return ""
	}
	return p.log.String()
}

// CPUSeconds returns the user+system CPU time a process used so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// After ")" fields start at 3 (state); utime is 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ut+st) / 100, nil
}
