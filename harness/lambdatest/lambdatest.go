// Package lambdatest runs real aws-lambda-go functions for integration
// tests: Start builds each function from its Go package, starts a
// lambdapool.Pool of them under AWS's Runtime Interface Emulator on a free
// loopback port, and stops it when the test ends.
//
//	p := lambdatest.Start(t, lambdatest.Function{
//		Name: "recorder", Package: lambdatest.Recorder, Instances: 2,
//		Env: []string{"RECORDER_DIR=" + dir},
//	})
//	client := lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(p.Endpoint()) })
//
// The emulator is the binary localstack/lambda.sh installs
// ($SLUICE_CACHE_DIR/bin/aws-lambda-rie, SLUICE_CACHE_DIR defaulting to
// <repository>/.cache), or the one $SLUICE_LAMBDA_RIE names. When it is
// missing a test is skipped on a developer's machine and fails under
// CI=true, as harness/testenv does for the other services.
//
// It is test support (harness/README.md): only tests import it; the pool
// itself, internal/lambdapool, is what cmd/lambdapool and
// localstack/lambda.sh run.
package lambdatest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/internal/lambdapool"
)

// The repository's functions.
const (
	Echo     = "github.com/sluicemq/sluice/internal/functions/echo"
	Recorder = "github.com/sluicemq/sluice/internal/functions/recorder"
)

// EnvRIE names the aws-lambda-rie binary to use instead of the one
// localstack/lambda.sh installs.
const EnvRIE = "SLUICE_LAMBDA_RIE"

// Function is one function of the pool, built from a Go package.
type Function struct {
	// Name is the function's name in the Invoke API.
	Name string
	// Package is the import path of the function's main package (Echo,
	// Recorder, or another).
	Package string
	// Instances, Timeout and Env are lambdapool.Function's (0: 1
	// instance, the RIE's 300 s timeout).
	Instances int
	Timeout   time.Duration
	Env       []string
}

// Start builds fns, starts a pool of them on 127.0.0.1:0 and returns it
// (Endpoint is the SDK's BaseEndpoint); it is closed when the test ends.
// The pool's log and the functions' output go to t.Log.
func Start(t testing.TB, fns ...Function) *lambdapool.Pool {
	t.Helper()
	rie := RIE(t)
	cfg := lambdapool.Config{RIE: rie, Logger: slog.New(slog.NewTextHandler(logWriter{t}, nil))}
	for _, f := range fns {
		cfg.Functions = append(cfg.Functions, lambdapool.Function{
			Name: f.Name, Bootstrap: Build(t, f.Package), Instances: f.Instances, Timeout: f.Timeout, Env: f.Env,
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := lambdapool.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close the lambda pool: %v", err)
		}
	})
	return p
}

// Build returns the path of pkg's bootstrap, built as Lambda's
// provided.al2023 runtime expects (CGO_ENABLED=0 go build -tags
// lambda.norpc). A package is built once while any test that asked for it
// runs; the file is removed when the last of them has ended.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	return builds.use(t).get(t, pkg)
}

// RIE returns the path of aws-lambda-rie: $SLUICE_LAMBDA_RIE, else where
// localstack/lambda.sh installs it. Missing: t.Fatal under CI=true (or
// when $SLUICE_LAMBDA_RIE names a missing file), t.Skip elsewhere.
func RIE(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvRIE); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", EnvRIE, err)
		}
		return p
	}
	dir := os.Getenv("SLUICE_CACHE_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".cache")
	}
	p := filepath.Join(dir, "bin", "aws-lambda-rie")
	_, err := os.Stat(p)
	switch {
	case err == nil:
		return p
	case errors.Is(err, fs.ErrNotExist) && !testenv.InCI():
		t.Skipf("the Lambda Runtime Interface Emulator is not at %s: install it with `bash localstack/lambda.sh up` (or set %s)", p, EnvRIE)
	default:
		t.Fatalf("the Lambda Runtime Interface Emulator is not at %s (CI=%s): %v; `bash localstack/lambda.sh up` installs it", p, os.Getenv("CI"), err)
	}
	return ""
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// builds is the process's cache of built functions: a package is built
// once while any test that uses it runs, into a directory removed when the
// last of them ends (rebuilding takes about half a second with a warm Go
// build cache).
var builds buildCache

type buildCache struct {
	mu    sync.Mutex
	users int
	dir   string
	bins  map[string]string // package → bootstrap
}

// use counts t as a user of the cache until it ends.
func (c *buildCache) use(t testing.TB) *buildCache {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users == 0 {
		dir, err := os.MkdirTemp("", "lambdatest-")
		if err != nil {
			t.Fatal(err)
		}
		c.dir, c.bins = dir, map[string]string{}
	}
	c.users++
	// Registered before the pool's Close, so it runs after it.
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.users--
		if c.users == 0 {
			os.RemoveAll(c.dir)
			c.dir, c.bins = "", nil
		}
	})
	return c
}

// get returns pkg's bootstrap, building it if needed.
func (c *buildCache) get(t testing.TB, pkg string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if bin, ok := c.bins[pkg]; ok {
		return bin
	}
	bin := filepath.Join(c.dir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	c.bins[pkg] = bin
	return bin
}

// logWriter writes the pool's log lines to t.Log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
