// Command lambdapool serves the Lambda Invoke API for real aws-lambda-go
// functions, each run by several AWS Runtime Interface Emulator processes
// (internal/lambdapool), until SIGINT or SIGTERM:
//
//	lambdapool --listen 127.0.0.1:9100 --rie .cache/bin/aws-lambda-rie \
//	    --function echo=.stack/data/lambda/bootstrap --function recorder=/tmp/recorder/bootstrap \
//	    --instances 4 --instances recorder:2 --env recorder:RECORDER_DIR=/tmp/rec
//
// Flags that take a value per function apply to every function, or to one
// when the value starts with its name and a colon (NAME:VALUE); a
// function's own value wins over the value for all:
//
//	--function NAME=PATH       a function and its bootstrap binary (repeat for more)
//	--instances [NAME:]N       instances (RIE processes), its concurrency (default 1)
//	--timeout [NAME:]DURATION  the function's timeout, whole seconds (default 300s, the RIE's)
//	--env [NAME:]KEY=VALUE     extra environment (repeatable, added up)
//
// It prints "lambdapool: serving <endpoint>" on stdout once every instance
// listens; its log (and the functions' output) goes to stderr.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/internal/lambdapool"
)

func main() {
	err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "lambdapool:", err)
		os.Exit(2)
	}
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, level, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p, err := lambdapool.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "lambdapool: serving", p.Endpoint())
	<-ctx.Done()
	cfg.Logger.Info("lambdapool stopping")
	return p.Close()
}

// parseFlags reads the command line into a pool's configuration and the
// log level.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (lambdapool.Config, slog.Level, error) {
	fs := flag.NewFlagSet("lambdapool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                                  lambdapool.Config
		functions, instances, timeouts, envs list
		level                                slog.Level
	)
	fs.StringVar(&cfg.Addr, "listen", "127.0.0.1:9100", "address of the Invoke API")
	fs.StringVar(&cfg.RIE, "rie", getenv("SLUICE_LAMBDA_RIE"), "path of aws-lambda-rie (default $SLUICE_LAMBDA_RIE)")
	fs.StringVar(&cfg.Region, "region", cmp.Or(getenv("AWS_REGION"), "us-east-1"), "AWS_REGION of the functions")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 30*time.Second, "how long an instance may take to listen")
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.Var(&functions, "function", "`NAME=PATH`: a function and its bootstrap binary (repeatable)")
	fs.Var(&instances, "instances", "`[NAME:]N`: instances (concurrency) of every function, or of NAME (default 1)")
	fs.Var(&timeouts, "timeout", "`[NAME:]DURATION`: timeout of every function, or of NAME, whole seconds (default 300s)")
	fs.Var(&envs, "env", "`[NAME:]KEY=VALUE`: environment of every function, or of NAME (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lambdapool --rie PATH --function NAME=PATH [--function ...] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, 0, err
	}
	if fs.NArg() > 0 {
		return cfg, 0, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	index := map[string]int{}
	for _, f := range functions {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			errs = append(errs, fmt.Errorf("--function %q: want NAME=PATH", f))
			continue
		}
		index[name] = len(cfg.Functions)
		cfg.Functions = append(cfg.Functions, lambdapool.Function{Name: name, Bootstrap: path})
	}
	// each applies a scoped flag's values, unscoped ones first so that a
	// function's own value wins.
	each := func(flagName string, values list, isScoped func(string) bool, set func(f *lambdapool.Function, v string) error) {
		for _, scopedPass := range []bool{false, true} {
			for _, raw := range values {
				name, v := "", raw
				if isScoped(raw) {
					name, v, _ = strings.Cut(raw, ":")
				}
				if (name != "") != scopedPass {
					continue
				}
				if name != "" {
					if _, ok := index[name]; !ok {
						errs = append(errs, fmt.Errorf("--%s %q: no --function %s", flagName, raw, name))
						continue
					}
				}
				for i := range cfg.Functions {
					if name == "" || cfg.Functions[i].Name == name {
						if err := set(&cfg.Functions[i], v); err != nil {
							errs = append(errs, fmt.Errorf("--%s %q: %w", flagName, raw, err))
						}
					}
				}
			}
		}
	}
	hasColon := func(s string) bool { return strings.Contains(s, ":") }
	each("instances", instances, hasColon, func(f *lambdapool.Function, v string) (err error) {
		f.Instances, err = strconv.Atoi(v)
		return err
	})
	each("timeout", timeouts, hasColon, func(f *lambdapool.Function, v string) (err error) {
		f.Timeout, err = time.ParseDuration(v)
		return err
	})
	// KEY=VALUE is scoped when a colon comes before the first '='.
	colonBeforeEquals := func(s string) bool {
		c, e := strings.IndexByte(s, ':'), strings.IndexByte(s, '=')
		return c >= 0 && (e < 0 || c < e)
	}
	each("env", envs, colonBeforeEquals, func(f *lambdapool.Function, v string) error {
		f.Env = append(f.Env, v)
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return cfg, 0, err
	}
	return cfg, level, cfg.Validate()
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }
