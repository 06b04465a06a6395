package lambdapool

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// Limits of a pool. Lambda's own limits where Lambda has one.
const (
	// MaxPayloadBytes is Lambda's limit on a synchronous invoke's request
	// and response payloads (6 MB).
	MaxPayloadBytes = 6 << 20
	// MaxClientContextBytes is the Invoke API's limit on the base64
	// X-Amz-Client-Context header.
	MaxClientContextBytes = 3583
	// MaxFunctions bounds the functions of one pool.
	MaxFunctions = 64
	// MaxInstances bounds one function's instances (RIE processes).
	MaxInstances = 64
	// MaxTimeout is Lambda's longest function timeout (900 s).
	MaxTimeout = 900 * time.Second
	// DefaultTimeout is the RIE's default function timeout (300 s; real
	// Lambda's default is 3 s, but the emulator's is what a function
	// started without a timeout gets).
	DefaultTimeout = 300 * time.Second
)

// Config is a pool's configuration. The zero value of every optional field
// is documented on it; Validate reports every violation at once.
type Config struct {
	// Addr is the listen address of the Invoke API. "" means
	// 127.0.0.1:0 (a free port; Pool.Endpoint tells which).
	Addr string
	// RIE is the path of the aws-lambda-rie binary. Required.
	RIE string
	// Region is the AWS_REGION every function sees and the region of the
	// ARNs in error messages. "" means us-east-1.
	Region string
	// Functions are the functions served, at least one, names distinct.
	Functions []Function
	// StartTimeout bounds how long one instance may take to listen on
	// its port. 0 means 10 s.
	StartTimeout time.Duration
	// StopGrace is how long Close lets an instance stop after SIGTERM
	// before SIGKILL. 0 means 5 s.
	StopGrace time.Duration
	// Logger receives the pool's log lines and the functions' output
	// (one record per line). nil means no logging.
	Logger *slog.Logger
}

// Function is one named function of the pool.
type Function struct {
	// Name is the function's name, as Lambda spells names: 1 to 64
	// letters, digits, hyphens and underscores.
	Name string
	// Bootstrap is the path of the function's bootstrap binary (a
	// provided.al2023 handler: CGO_ENABLED=0 go build -tags lambda.norpc).
	// Each instance runs in the binary's directory.
	Bootstrap string
	// Instances is how many RIE processes run the function: its
	// concurrency. 0 means 1; at most MaxInstances.
	Instances int
	// Timeout is the function's timeout, in whole seconds, at most
	// MaxTimeout. 0 means DefaultTimeout.
	Timeout time.Duration
	// Env is extra environment of the function, KEY=VALUE each, on top of
	// the pool process's own. The pool sets AWS_LAMBDA_FUNCTION_NAME,
	// AWS_LAMBDA_FUNCTION_TIMEOUT, AWS_REGION and SLUICE_LAMBDAPOOL_INSTANCE
	// and unsets AWS_LAMBDA_MAX_CONCURRENCY; Env may not name them.
	Env []string
}

// envInstance marks every process of one instance (the RIE and, through
// the environment the RIE forwards, the bootstrap), so that a bootstrap
// left behind by a killed RIE can be found and stopped.
const envInstance = "SLUICE_LAMBDAPOOL_INSTANCE"

// reservedEnv are the variables the pool sets or unsets itself.
var reservedEnv = []string{
	"AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_TIMEOUT", "AWS_REGION",
	"AWS_LAMBDA_MAX_CONCURRENCY", envInstance,
}

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate reports every violation of c's documented bounds.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.RIE == "" {
		bad("RIE: the path of aws-lambda-rie is required")
	}
	if len(c.Functions) == 0 {
		bad("Functions: at least one function is required")
	}
	if len(c.Functions) > MaxFunctions {
		bad("Functions: %d functions, more than %d", len(c.Functions), MaxFunctions)
	}
	if c.StartTimeout < 0 {
		bad("StartTimeout: %v is negative", c.StartTimeout)
	}
	if c.StopGrace < 0 {
		bad("StopGrace: %v is negative", c.StopGrace)
	}
	seen := map[string]bool{}
	for i, f := range c.Functions {
		where := fmt.Sprintf("Functions[%d] (%q)", i, f.Name)
		if !functionName.MatchString(f.Name) {
			bad("%s: the name must be 1 to 64 letters, digits, '-' or '_'", where)
		}
		if seen[f.Name] {
			bad("%s: the name is used twice", where)
		}
		seen[f.Name] = true
		if f.Bootstrap == "" {
			bad("%s: Bootstrap is required", where)
		}
		if f.Instances < 0 || f.Instances > MaxInstances {
			bad("%s: Instances %d is not in 0..%d", where, f.Instances, MaxInstances)
		}
		if f.Timeout < 0 || f.Timeout > MaxTimeout || f.Timeout%time.Second != 0 {
			bad("%s: Timeout %v is not whole seconds in 0..%v", where, f.Timeout, MaxTimeout)
		}
		for _, kv := range f.Env {
			k, _, ok := strings.Cut(kv, "=")
			switch {
			case !ok || k == "":
				bad("%s: Env entry %q is not KEY=VALUE", where, kv)
			case isReservedEnv(k):
				bad("%s: Env may not set %s (the pool sets it)", where, k)
			}
		}
	}
	return errors.Join(errs...)
}

func isReservedEnv(k string) bool {
	for _, r := range reservedEnv {
		if k == r {
			return true
		}
	}
	return false
}

// withDefaults returns c with every zero optional field at its default.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.StopGrace == 0 {
		c.StopGrace = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	fs := make([]Function, len(c.Functions))
	for i, f := range c.Functions {
		if f.Instances == 0 {
			f.Instances = 1
		}
		if f.Timeout == 0 {
			f.Timeout = DefaultTimeout
		}
		f.Env = append([]string(nil), f.Env...)
		fs[i] = f
	}
	c.Functions = fs
	return c
}
