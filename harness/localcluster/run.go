package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/internal/tlsconf"
)

// State is what Up records in Dir/cluster.json, and what Down and Status
// read: the configuration, the binary, and every process of the plan with
// the pid and start time of its current run. A pid is only ever signalled
// when /proc still shows a process with that start time, so a stale state
// file never makes Down signal a stranger.
type State struct {
	Config Config    `json:"config"`
	Bin    string    `json:"bin"`
	Procs  []Running `json:"procs"`
}

// Running is a planned process and its last run.
type Running struct {
	Proc
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"` // field 22 of /proc/PID/stat
	Log   string `json:"log"`
}

// Alive reports whether the process of r's last run is still running.
func (r Running) Alive() bool {
	if r.PID <= 0 {
		return false
	}
	st, err := procStart(r.PID)
	return err == nil && st == r.Start
}

func statePath(dir string) string { return filepath.Join(dir, "cluster.json") }

// LoadState reads dir's state; os.ErrNotExist when no cluster was started
// there.
func LoadState(dir string) (State, error) {
	var st State
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w (remove it if no cluster runs)", statePath(dir), err)
	}
	return st, nil
}

func (st State) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(st.Config.Dir) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(st.Config.Dir))
}

// Options of Up.
type Options struct {
	Bin string    // the sluice binary (required)
	Out io.Writer // progress lines; nil: discard
	// StartTimeout bounds each process's wait to become healthy
	// (default 90 s: a first start migrates the keyspace).
	StartTimeout time.Duration
}

// Up starts every process of cfg that is not running (all of them the
// first time; after a kill or a crash, the ones that died, with the same
// flags and data) and waits until each serves its health check. A cluster
// already recorded in cfg.Dir with different flags is refused: stop it
// with Down first.
func Up(ctx context.Context, cfg Config, o Options) (State, error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	cfg, err := cfg.Normalize()
	if err != nil {
		return State{}, err
	}
	plan, err := cfg.Plan()
	if err != nil {
		return State{}, err
	}
	if o.Bin == "" {
		return State{}, errors.New("no sluice binary")
	}
	for _, d := range []string{"data", "log"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return State{}, err
		}
	}
	st := State{Config: cfg, Bin: o.Bin}
	for _, p := range plan {
		st.Procs = append(st.Procs, Running{Proc: p, Log: filepath.Join(cfg.Dir, "log", p.Name+".log")})
	}
	if old, err := LoadState(cfg.Dir); err == nil {
		if err := adopt(&st, old); err != nil {
			return old, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return State{}, err
	}
	if err := ensureBucket(ctx, cfg); err != nil {
		return st, err
	}
	// ingest-1 first and alone: it creates the catalog table and the
	// keyspace the others use.
	waves := [][]int{{0}, {}}
	for i := 1; i < len(st.Procs); i++ {
		waves[1] = append(waves[1], i)
	}
	for _, wave := range waves {
		var started []*child
		for _, i := range wave {
			r := &st.Procs[i]
			if r.Alive() {
				fmt.Fprintf(out, "%-12s already running (pid %d)\n", r.Name, r.PID)
				continue
			}
			c, err := start(st.Bin, cfg.Env(), r, cfg.TLS)
			if err != nil {
				return st, err
			}
			if err := st.save(); err != nil {
				return st, err
			}
			fmt.Fprintf(out, "%-12s started (pid %d)\n", r.Name, r.PID)
			started = append(started, c)
		}
		for _, c := range started {
			t0 := time.Now()
			if err := c.waitReady(ctx, o.StartTimeout); err != nil {
				return st, err
			}
			fmt.Fprintf(out, "%-12s ready in %.1fs\n", c.r.Name, time.Since(t0).Seconds())
		}
	}
	return st, nil
}

// adopt carries over the runs of old's processes into st when old
// describes the same cluster; a different cluster that still runs is an
// error.
func adopt(st *State, old State) error {
	same := len(old.Procs) == len(st.Procs)
	for i := range old.Procs {
		if same && !slices.Equal(old.Procs[i].Args, st.Procs[i].Args) {
			same = false
		}
	}
	if same {
		for i := range st.Procs {
			st.Procs[i].PID, st.Procs[i].Start = old.Procs[i].PID, old.Procs[i].Start
		}
		return nil
	}
	for _, r := range old.Procs {
		if r.Alive() {
			return fmt.Errorf("a cluster with other settings runs from %s (%s is pid %d): stop it first (localstack/cluster.sh down)",
				old.Config.Dir, r.Name, r.PID)
		}
	}
	return nil
}

// child is a process Up started and still waits for.
type child struct {
	r      *Running
	exited chan struct{}
	tls    *TLS // the cluster's, for the health check
}

// start runs r detached (its own session, output appended to its log) and
// records its pid and start time in r.
func start(bin string, env []string, r *Running, tlsFiles *TLS) (*child, error) {
	lf, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "=== %s started at %s: %s %s\n", r.Name, time.Now().UTC().Format(time.RFC3339), bin, strings.Join(r.Args, " "))
	cmd := exec.Command(bin, r.Args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.Name, err)
	}
	r.PID = cmd.Process.Pid
	if r.Start, err = procStart(r.PID); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.Name, err)
	}
	c := &child{r: r, exited: make(chan struct{}), tls: tlsFiles}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// waitReady waits until the process answers its health check (or, with
// no listener, is still running after a second).
func (c *child) waitReady(ctx context.Context, timeout time.Duration) error {
	exited := func() error {
		return fmt.Errorf("%s exited at start; the end of %s:\n%s", c.r.Name, c.r.Log, tailFile(c.r.Log, 3000))
	}
	if c.r.Addr == "" {
		select {
		case <-c.exited:
			return exited()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
			return nil
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-c.exited:
			return exited()
		default:
		}
		if Healthy(ctx, c.r.Addr, c.tls) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not serving on %s after %s; see %s", c.r.Name, c.r.Addr, timeout, c.r.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Healthy reports whether addr answers the gRPC health check (over the
// Connect protocol, JSON) with SERVING; over mTLS with the cluster's
// certificate when t is set.
func Healthy(ctx context.Context, addr string, t *TLS) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	hc, scheme := http.DefaultClient, "http://"
	if t != nil {
		cfg, err := tlsconf.Client{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}.Config()
		if err != nil {
			return false
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		hc, scheme = &http.Client{Transport: tr}, "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"SERVING"`))
}

// Down stops every running process of the cluster recorded in dir, in
// reverse start order: SIGTERM to its process group, SIGKILL after
// grace. It keeps the data, logs and state, so Up starts the same
// cluster again.
func Down(dir string, grace time.Duration, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	st, err := LoadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "no cluster was started from %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for i := len(st.Procs) - 1; i >= 0; i-- {
		r := st.Procs[i]
		if !r.Alive() {
			continue
		}
		if err := stop(r, grace); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "%-12s stopped (pid %d)\n", r.Name, r.PID)
	}
	return errors.Join(errs...)
}

func stop(r Running, grace time.Duration) error {
	signal := func(sig syscall.Signal) {
		if syscall.Kill(-r.PID, sig) != nil { // its session's process group
			_ = syscall.Kill(r.PID, sig)
		}
	}
	signal(syscall.SIGCONT) // a paused process handles SIGTERM only once continued
	signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for r.Alive() {
		if time.Now().After(deadline) {
			signal(syscall.SIGKILL)
			for i := 0; i < 100 && r.Alive(); i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if r.Alive() {
				return fmt.Errorf("%s (pid %d) still runs after SIGKILL", r.Name, r.PID)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// StatusLine is one process in Status.
type StatusLine struct {
	Running
	Up      bool   // the process runs
	Serving bool   // it answers its health check (always false without a listener)
	State   string // "serving", "running", "not serving", "DOWN"
}

// Status reports every process of the cluster recorded in dir.
func Status(ctx context.Context, dir string) (State, []StatusLine, error) {
	st, err := LoadState(dir)
	if err != nil {
		return st, nil, err
	}
	lines := make([]StatusLine, 0, len(st.Procs))
	for _, r := range st.Procs {
		l := StatusLine{Running: r, Up: r.Alive()}
		switch {
		case !l.Up:
			l.State = "DOWN"
		case r.Addr == "":
			l.State = "running"
		case Healthy(ctx, r.Addr, st.Config.TLS):
			l.Serving, l.State = true, "serving"
		default:
			l.State = "not serving"
		}
		lines = append(lines, l)
	}
	return st, lines, nil
}

// procStart returns field 22 of /proc/PID/stat: the process's start time
// in clock ticks since boot, which with the pid names one process for good.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); a zombie has exited already.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" {
		return 0, fmt.Errorf("pid %d has exited", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// tailFile returns the last n bytes of a file (what there is of them).
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	_, _ = f.ReadAt(b, off)
	return string(b)
}
