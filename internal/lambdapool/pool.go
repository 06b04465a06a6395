package lambdapool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Pool serves the Lambda Invoke API for its functions, each run by a fixed
// number of RIE processes (instances) that take one invocation at a time.
//
// Goroutines, all owned by the Pool and joined by Close: the HTTP server's
// (serve, and one per request, counted in handlers), and one supervisor
// per instance, which restarts the instance whenever its process exits.
type Pool struct {
	cfg       Config
	log       *slog.Logger
	functions map[string]*function
	launch    launchFunc
	// ctx is canceled by Close: it stops the supervisors and aborts the
	// requests in flight to instances.
	ctx    context.Context
	cancel context.CancelFunc
	client *http.Client // to the instances
	ln     net.Listener
	srv    *http.Server

	serveErr    chan error // serve's result, buffered
	supervisors sync.WaitGroup
	handlers    sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
}

// function is one function's instances.
type function struct {
	cfg Function
	// mu guards every instance's b and busy.
	mu        sync.Mutex
	instances []*instance
}

// instance is one slot of a function's concurrency.
type instance struct {
	index int
	// b is the running process; nil while the instance (re)starts.
	// Invariant: b is handed to at most one invocation at a time (busy).
	b        backend
	busy     bool
	restarts int // launches after the first
}

// Start validates cfg, starts every instance of every function, waits
// until each listens (ctx bounds that wait, not the pool's life), and
// serves the Invoke API on cfg.Addr. Close stops it all.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lambdapool config: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := checkExecutables(&cfg); err != nil {
		return nil, err
	}
	l := &rieLauncher{rie: cfg.RIE, region: cfg.Region, startTimeout: cfg.StartTimeout,
		log: cfg.Logger, poolID: randomHex(6), ports: newPortSet()}
	return start(ctx, cfg, l.launch)
}

// checkExecutables makes the RIE's and bootstraps' paths absolute (each
// instance runs in its bootstrap's directory) and checks they are
// executable files, reporting every problem.
func checkExecutables(cfg *Config) error {
	var errs []error
	check := func(what string, path *string) {
		abs, err := absExecutable(*path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		*path = abs
	}
	check("RIE", &cfg.RIE)
	for i := range cfg.Functions {
		check("function "+cfg.Functions[i].Name+": bootstrap", &cfg.Functions[i].Bootstrap)
	}
	return errors.Join(errs...)
}

// start is Start over any launcher: the unit tests' seam.
func start(ctx context.Context, cfg Config, launch launchFunc) (*Pool, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("lambdapool: listen on %s: %w", cfg.Addr, err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		cfg: cfg, log: cfg.Logger, functions: map[string]*function{}, launch: launch,
		ctx: pctx, cancel: cancel, ln: ln, serveErr: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // loopback only, never through a proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1, // one invocation at a time per instance
			IdleConnTimeout:     time.Minute,
		}},
	}
	// Launch every instance at once; each gets a few tries (a port picked
	// free can be taken before the RIE binds it).
	var wg sync.WaitGroup
	errs := make(chan error, totalInstances(cfg))
	for _, fc := range cfg.Functions {
		f := &function{cfg: fc}
		p.functions[fc.Name] = f
		for i := range fc.Instances {
			in := &instance{index: i}
			f.instances = append(f.instances, in)
			wg.Go(func() {
				var err error
				for range 3 {
					if in.b, err = launch(ctx, fc, i); err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		for _, f := range p.functions {
			for _, in := range f.instances {
				if in.b != nil {
					in.b.Stop(0)
				}
			}
		}
		ln.Close()
		cancel()
		return nil, fmt.Errorf("lambdapool: start: %w", err)
	}
	for _, f := range p.functions {
		for _, in := range f.instances {
			p.supervisors.Go(func() { p.supervise(f, in, in.b) })
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc(invokePattern, p.serveInvoke)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeAPIError(w, unknownOperation()) })
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.handlers.Add(1)
			defer p.handlers.Done()
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() { p.serveErr <- p.srv.Serve(ln) }() // owned by p: Close reads serveErr
	names := make([]any, 0, 2*len(cfg.Functions))
	for _, f := range cfg.Functions {
		names = append(names, f.Name, f.Instances)
	}
	p.log.Info("lambdapool serving", "endpoint", p.Endpoint(), slog.Group("instances", names...))
	return p, nil
}

func totalInstances(cfg Config) int {
	n := 0
	for _, f := range cfg.Functions {
		n += f.Instances
	}
	return n
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// supervise watches instance in of f, running b, and starts a new process
// whenever the current one exits, until Close.
func (p *Pool) supervise(f *function, in *instance, b backend) {
	log := p.log.With("function", f.cfg.Name, "instance", in.index)
	backoff := restartBackoff{}
	for {
		select {
		case <-p.ctx.Done():
			p.setBackend(f, in, nil)
			b.Stop(p.cfg.StopGrace)
			return
		case <-b.Exited():
		}
		p.setBackend(f, in, nil)
		b.Stop(0) // its output flushed, a bootstrap left behind killed
		log.Warn("instance exited; restarting", "pid", b.PID())
		for {
			nb, err := p.launch(p.ctx, f.cfg, in.index)
			if err == nil {
				b = nb
				backoff.reset()
				break
			}
			if p.ctx.Err() != nil {
				return
			}
			d := backoff.next()
			log.Warn("instance failed to start; retrying", "err", err, "retry_in", d)
			t := time.NewTimer(d)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		f.mu.Lock()
		in.restarts++
		f.mu.Unlock()
		p.setBackend(f, in, b)
	}
}

// restartBackoff doubles from 100 ms to 5 s between failed starts.
type restartBackoff struct{ d time.Duration }

func (r *restartBackoff) next() time.Duration {
	r.d = min(max(2*r.d, 100*time.Millisecond), 5*time.Second)
	return r.d
}

func (r *restartBackoff) reset() { r.d = 0 }

func (p *Pool) setBackend(f *function, in *instance, b backend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in.b = b
}

// acquire takes a free, running instance of f; ok is false when there is
// none (every instance busy or restarting).
func (f *function) acquire() (*instance, backend, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.instances {
		if in.b == nil || in.busy {
			continue
		}
		select {
		case <-in.b.Exited(): // its supervisor is about to restart it
			continue
		default:
		}
		in.busy = true
		return in, in.b, true
	}
	return nil, nil, false
}

// release ends in's invocation on b.
func (f *function) release(in *instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !in.busy {
		panic("lambdapool: release of an idle instance")
	}
	in.busy = false
}

// Endpoint is the base URL of the Invoke API, for the SDK's BaseEndpoint:
// http://127.0.0.1:PORT.
func (p *Pool) Endpoint() string {
	a := p.ln.Addr().(*net.TCPAddr)
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}

// InstanceState describes one instance of a function.
type InstanceState struct {
	Index int
	// PID is the RIE process's id; 0 while the instance (re)starts.
	PID int
	// Busy: an invocation runs on it.
	Busy bool
	// Restarts counts the processes started after the first.
	Restarts int
}

// Instances describes function's instances, in index order; nil for an
// unknown function.
func (p *Pool) Instances(function string) []InstanceState {
	f := p.functions[function]
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]InstanceState, len(f.instances))
	for i, in := range f.instances {
		out[i] = InstanceState{Index: in.index, Busy: in.busy, Restarts: in.restarts}
		if in.b != nil {
			out[i].PID = in.b.PID()
		}
	}
	return out
}

// Close stops serving and stops every instance: the listener and
// connections close, invocations in flight are aborted (their callers get
// no answer), then each RIE gets SIGTERM (SIGKILL after StopGrace) and any
// bootstrap left behind is killed. It waits for every goroutine and
// process. Safe to call more than once.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		err := p.srv.Close()
		p.cancel()
		p.handlers.Wait()
		p.supervisors.Wait()
		if serr := <-p.serveErr; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		p.client.CloseIdleConnections()
		p.closeErr = err
		p.log.Info("lambdapool stopped")
	})
	return p.closeErr
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// absExecutable returns path made absolute, or why it is not an
// executable regular file.
func absExecutable(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", abs)
	}
	return abs, nil
}
