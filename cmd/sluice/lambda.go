package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// runtimeFlags are the trigger runtime's flags, shared by `sluice dev` and
// `sluice fetch`.
type runtimeFlags struct {
	lambdaEndpoint string
	refresh        time.Duration
	sessionTimeout time.Duration
	noTriggers     bool
}

func addRuntimeFlags(cmd *cobra.Command, f *runtimeFlags) {
	fs := cmd.Flags()
	fs.StringVar(&f.lambdaEndpoint, "lambda-endpoint", "",
		"Lambda Invoke API endpoint for triggers' functions: an emulator such as localstack/lambda.sh's (http://127.0.0.1:9100) or LocalStack; empty: AWS Lambda, with region and credentials from the AWS environment")
	fs.DurationVar(&f.refresh, "trigger-refresh", fetch.DefaultTriggerRefresh, "how often the trigger runtime reads the catalog's triggers (created, changed and deleted triggers take effect within it)")
	fs.DurationVar(&f.sessionTimeout, "trigger-session-timeout", fetch.DefaultTriggerSessionTimeout, "how long after this process stops heartbeating (dies, pauses) its trigger partitions move to other fetch copies")
	fs.BoolVar(&f.noTriggers, "no-triggers", false, "run no triggers on this process (its fetch service still serves consumers)")
}

func (f *runtimeFlags) check(c *flagCheck) {
	if f.lambdaEndpoint != "" {
		u, err := url.Parse(f.lambdaEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.badf("--lambda-endpoint %q: want an http:// or https:// URL such as http://127.0.0.1:9100", f.lambdaEndpoint)
		}
	}
	if f.refresh == 0 {
		f.refresh = fetch.DefaultTriggerRefresh
	}
	if err := (fetch.Config{TriggerRefresh: f.refresh}).Validate(); err != nil || f.refresh < 0 {
		c.badf("--trigger-refresh %v: want a duration of 10ms..1h", f.refresh)
	}
	if f.sessionTimeout == 0 {
		f.sessionTimeout = fetch.DefaultTriggerSessionTimeout
	}
	if err := (fetch.Config{TriggerSessionTimeout: f.sessionTimeout}).Validate(); err != nil || f.sessionTimeout < 0 {
		c.badf("--trigger-session-timeout %v: want %v..%v", f.sessionTimeout, fetch.MinSessionTimeout, fetch.MaxSessionTimeout)
	}
}

// invoker is the triggers' Lambda client (nil with --no-triggers). With an
// emulator endpoint and no AWS credentials in the environment it signs with
// placeholder credentials, which emulators accept; the region defaults to
// us-east-1.
func (f *runtimeFlags) invoker(ctx context.Context) (*trigger.Invoker, error) {
	if f.noTriggers {
		return nil, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config for Lambda: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if f.lambdaEndpoint != "" {
		if cfg.Credentials == nil {
			cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("sluice-dev", "sluice-dev", ""))
		} else if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("sluice-dev", "sluice-dev", ""))
		}
	}
	return trigger.NewInvoker(cfg, f.lambdaEndpoint), nil
}

// where says where invocations go, for the start-up line.
func (f *runtimeFlags) where() string {
	switch {
	case f.noTriggers:
		return "triggers off (--no-triggers)"
	case f.lambdaEndpoint != "":
		return "triggers invoke functions at " + f.lambdaEndpoint
	}
	return "triggers invoke AWS Lambda (AWS environment's region and credentials; --lambda-endpoint for an emulator)"
}
