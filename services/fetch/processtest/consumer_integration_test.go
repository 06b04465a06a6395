//go:build integration

package processtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// consumerProc is one `sluice consume TOPIC --group G --format json
// --follow` process: a group member whose stdout (one JSON record per line)
// is parsed into a printLog as it comes. Its reader goroutine owns the
// process's stdout and waits for the process; exited closes after both.
type consumerProc struct {
	name   string
	cmd    *exec.Cmd
	stderr lockedBuffer
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// startConsumer starts a consumer named name; it is stopped when t ends.
func (c *cluster) startConsumer(t *testing.T, name, group, topic string, out *printLog) *consumerProc {
	t.Helper()
	p := &consumerProc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(c.bin, "consume", topic, "--group", group, "--format", "json", "--follow", "--addr", c.fetchAddr)
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		out.read(name, stdout)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 4000))
		}
	})
	return p
}

// stop ends the process with SIGTERM (the CLI commits what it printed and
// leaves the group), SIGKILL after 15 s, and returns how it exited: nil
// for a clean exit, or after a kill this helper made.
func (p *consumerProc) stop() error {
	select {
	case <-p.exited:
		return nil // killed earlier, or exited by itself (reported by the test)
	default:
	}
	// A stopped process handles SIGTERM only once continued.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("exit after SIGTERM: %w; stderr:\n%s", p.err, tail(p.stderr.String(), 4000))
		}
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("still running 15 s after SIGTERM; killed")
	}
}

// kill sends SIGKILL and waits (up to 10 s) for the process to be gone.
func (p *consumerProc) kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s: not gone 10 s after SIGKILL", p.name)
	}
}

func (p *consumerProc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// running reports whether the process has not exited.
func (p *consumerProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// lockedBuffer collects a process's stderr (written by exec's copying
// goroutine), keeping the last MiB at most.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 2<<20 {
		b.buf.Next(b.buf.Len() - 1<<20)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// po names one record: partition and offset (the test uses one topic).
type po struct {
	partition int32
	offset    int64
}

// printed is one record a consumer process printed, and when the test read
// the line.
type printed struct {
	proc  string
	po    po
	value string
	at    time.Time
}

// maxPrinted bounds the records a printLog keeps: far above what a test
// produces, so reaching it is a failure, not a truncation.
const maxPrinted = 2_000_000

// printLog is what every consumer process printed, in the order read.
type printLog struct {
	mu   sync.Mutex
	recs []printed
	bad  []string // lines that are not a record (at most 10 kept)
	nBad int
	full bool
}

// read parses proc's stdout until it closes.
func (l *printLog) read(proc string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec struct {
			Topic     string `json:"topic"`
			Partition *int32 `json:"partition"`
			Offset    *int64 `json:"offset"`
			Value     string `json:"value"`
		}
		err := json.Unmarshal(sc.Bytes(), &rec)
		now := time.Now()
		l.mu.Lock()
		switch {
		case err != nil || rec.Partition == nil || rec.Offset == nil:
			l.nBad++
			if len(l.bad) < 10 {
				l.bad = append(l.bad, fmt.Sprintf("%s: %q", proc, sc.Text()))
			}
		case len(l.recs) >= maxPrinted:
			l.full = true
		default:
			l.recs = append(l.recs, printed{proc: proc, po: po{*rec.Partition, *rec.Offset}, value: rec.Value, at: now})
		}
		l.mu.Unlock()
	}
	if err := sc.Err(); err != nil {
		l.mu.Lock()
		l.nBad++
		l.bad = append(l.bad, fmt.Sprintf("%s: reading stdout: %v", proc, err))
		l.mu.Unlock()
	}
}

// problems reports lines that were not records, or an overflow.
func (l *printLog) problems() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.nBad > 0 {
		errs = append(errs, fmt.Errorf("%d stdout lines are not records, e.g. %q", l.nBad, l.bad))
	}
	if l.full {
		errs = append(errs, fmt.Errorf("more than %d records printed", maxPrinted))
	}
	return errors.Join(errs...)
}

// partitions returns the partitions proc printed records of in [from, to).
func (l *printLog) partitions(proc string, from, to time.Time) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int32
	for _, r := range l.recs {
		if r.proc == proc && !r.at.Before(from) && r.at.Before(to) && !slices.Contains(out, r.po.partition) {
			out = append(out, r.po.partition)
		}
	}
	slices.Sort(out)
	return out
}

// first returns when one of procs first printed a record of partition p at
// or after from; the zero time if none did.
func (l *printLog) first(p int32, from time.Time, procs ...string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.po.partition == p && !r.at.Before(from) && slices.Contains(procs, r.proc) {
			return r.at
		}
	}
	return time.Time{}
}

// maxGap returns the longest time in [from, to] during which proc printed
// nothing (the window's edges count), and the records it printed in it.
func (l *printLog) maxGap(proc string, from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, gap, n := from, time.Duration(0), 0
	for _, r := range l.recs {
		if r.proc != proc || r.at.Before(from) || r.at.After(to) {
			continue
		}
		gap = max(gap, r.at.Sub(last))
		last = r.at
		n++
	}
	return max(gap, to.Sub(last)), n
}

// count returns the records proc printed.
func (l *printLog) count(proc string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.proc == proc {
			n++
		}
	}
	return n
}

// byRecord returns every printing of every record.
func (l *printLog) byRecord() map[po][]printed {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[po][]printed, len(l.recs))
	for _, r := range l.recs {
		out[r.po] = append(out[r.po], r)
	}
	return out
}

// missing returns how many of want nobody printed, and one of them.
func (l *printLog) missing(want map[po]string) (int, po) {
	l.mu.Lock()
	seen := make(map[po]bool, len(l.recs))
	for _, r := range l.recs {
		seen[r.po] = true
	}
	l.mu.Unlock()
	n, example := 0, po{}
	for k := range want {
		if !seen[k] {
			if n == 0 || k.partition < example.partition || (k.partition == example.partition && k.offset < example.offset) {
				example = k
			}
			n++
		}
	}
	return n, example
}
