package main

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/lambdapool"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseFlags(t *testing.T) {
	cfg, level, err := parseFlags([]string{
		"--listen", "127.0.0.1:0", "--rie", "/bin/rie", "--log-level", "debug",
		"--function", "echo=/f/echo/bootstrap", "--function", "rec=/f/rec/bootstrap",
		"--instances", "rec:2", "--instances", "4", // a function's own value wins, whatever the order
		"--timeout", "echo:30s",
		"--env", "A=1", "--env", "rec:RECORDER_DIR=/tmp/x:y", "--env", "B=c:d",
	}, env(map[string]string{"AWS_REGION": "eu-west-1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []lambdapool.Function{
		{Name: "echo", Bootstrap: "/f/echo/bootstrap", Instances: 4, Timeout: 30 * time.Second, Env: []string{"A=1", "B=c:d"}},
		{Name: "rec", Bootstrap: "/f/rec/bootstrap", Instances: 2, Env: []string{"A=1", "B=c:d", "RECORDER_DIR=/tmp/x:y"}},
	}
	if !reflect.DeepEqual(cfg.Functions, want) {
		t.Fatalf("functions = %+v\nwant %+v", cfg.Functions, want)
	}
	if cfg.Addr != "127.0.0.1:0" || cfg.RIE != "/bin/rie" || cfg.Region != "eu-west-1" || level != slog.LevelDebug {
		t.Fatalf("cfg = %+v, level %v", cfg, level)
	}
}

func TestParseFlagsDefaultsAndErrors(t *testing.T) {
	cfg, level, err := parseFlags([]string{"--function", "echo=/b"}, env(map[string]string{"SLUICE_LAMBDA_RIE": "/env/rie"}), io.Discard)
	if err != nil || cfg.RIE != "/env/rie" || cfg.Addr != "127.0.0.1:9100" || cfg.Region != "us-east-1" || level != slog.LevelInfo {
		t.Fatalf("defaults: %+v %v %v", cfg, level, err)
	}
	for args, want := range map[string]string{
		"--function echo":                             `want NAME=PATH`,
		"--rie /r --function a=/b --instances b:2":    `no --function b`,
		"--rie /r --function a=/b --instances x":      `--instances "x"`,
		"--rie /r --function a=/b --timeout a:1500ms": `Timeout 1.5s`,
		"--rie /r --function a=/b --env AWS_REGION=x": `may not set AWS_REGION`,
		"--rie /r --function a=/b extra":              `unexpected arguments`,
		"--rie /r":                                    `at least one function`,
	} {
		_, _, err := parseFlags(strings.Fields(args), env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}
