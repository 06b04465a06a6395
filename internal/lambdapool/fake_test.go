package lambdapool

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHandler plays an RIE's invoke API for one invocation on fb.
type fakeHandler func(fb *fakeBackend, w http.ResponseWriter, r *http.Request)

// fakeFleet launches fakeBackends: httptest servers standing in for RIE
// processes, so the pool's routing, throttling and restarts are tested
// without the emulator. Every backend fails the test if it ever gets two
// invocations at once (an RIE crashes then).
type fakeFleet struct {
	t        *testing.T
	handlers map[string]fakeHandler
	// failNext makes that many launches fail.
	failNext atomic.Int32

	mu       sync.Mutex
	backends []*fakeBackend
	pid      int
}

func newFleet(t *testing.T, handlers map[string]fakeHandler) *fakeFleet {
	return &fakeFleet{t: t, handlers: handlers, pid: 1000}
}

func (ff *fakeFleet) launch(ctx context.Context, fn Function, index int) (backend, error) {
	if ff.failNext.Load() > 0 {
		ff.failNext.Add(-1)
		return nil, errFakeLaunch
	}
	h := ff.handlers[fn.Name]
	ff.mu.Lock()
	ff.pid++
	fb := &fakeBackend{fn: fn, index: index, pid: ff.pid, exited: make(chan struct{})}
	ff.backends = append(ff.backends, fb)
	ff.mu.Unlock()
	fb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := fb.inflight.Add(1); n > 1 {
			ff.t.Errorf("instance %d of %s got %d invocations at once", index, fn.Name, n)
		}
		defer fb.inflight.Add(-1)
		if r.Method != http.MethodPost || r.URL.Path != rieInvokePath {
			ff.t.Errorf("instance got %s %s, want POST %s", r.Method, r.URL.Path, rieInvokePath)
		}
		fb.invocations.Add(1)
		h(fb, w, r)
	}))
	return fb, nil
}

var errFakeLaunch = errors.New("fake launch failure")

// all returns every backend launched so far.
func (ff *fakeFleet) all() []*fakeBackend {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return append([]*fakeBackend(nil), ff.backends...)
}

type fakeBackend struct {
	fn          Function
	index, pid  int
	srv         *httptest.Server
	inflight    atomic.Int32
	invocations atomic.Int32

	exited   chan struct{}
	exitOnce sync.Once
	stopOnce sync.Once
	stopped  atomic.Bool
}

func (fb *fakeBackend) Addr() string            { return fb.srv.Listener.Addr().String() }
func (fb *fakeBackend) PID() int                { return fb.pid }
func (fb *fakeBackend) Exited() <-chan struct{} { return fb.exited }

func (fb *fakeBackend) Stop(time.Duration) {
	fb.stopOnce.Do(func() {
		fb.srv.CloseClientConnections()
		fb.srv.Close()
		fb.stopped.Store(true)
		fb.exit()
	})
	<-fb.exited
}

// exit marks the process exited, as if it died.
func (fb *fakeBackend) exit() { fb.exitOnce.Do(func() { close(fb.exited) }) }

// crash dies in the middle of an invocation: the connection drops with no
// answer and the process is gone.
func (fb *fakeBackend) crash(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
	fb.exit()
}

// startFake starts a pool over fleet with fns; Close at cleanup.
func startFake(t *testing.T, fleet *fakeFleet, fns ...Function) *Pool {
	t.Helper()
	cfg := Config{RIE: "/fake/aws-lambda-rie", Functions: fns, Logger: testLogger(t)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := start(context.Background(), cfg.withDefaults(), fleet.launch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// sdkClient is aws-sdk-go-v2's Lambda client aimed at endpoint, without
// retries (as services/fetch/trigger's Invoker).
func sdkClient(endpoint string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:      aws.NopRetryer{},
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitFor polls cond every 5 ms until it holds, or fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
