// Command lambda is the compactor as an AWS Lambda function: the same
// library as `sluice compactor`, one bounded pass (compactor.Pass) per
// invocation, invoked on a schedule by an EventBridge rule (the payload is
// an events.CloudWatchEvent, "Scheduled Event"; its content is not used).
// It answers the pass's compactor.Report as JSON, or the pass's error (a
// later invocation retries whatever failed), and writes the report as
// metrics in CloudWatch's embedded metric format (emf.go).
//
// Configuration is the environment (compactor.ConfigFromEnv):
// SLUICE_CATALOG_TABLE (DynamoDB catalog), SLUICE_OBJECTS (object store
// URL, e.g. s3://bucket?region=eu-west-1), SLUICE_COMPACTOR_* limits; AWS
// credentials, region and endpoint the usual way (AWS_REGION,
// AWS_ENDPOINT_URL, the function's role); SLUICE_TLS_CA, SLUICE_TLS_CERT
// and SLUICE_TLS_KEY (PEM files) reach bookies that serve mTLS, as
// `sluice compactor --tls-ca/--tls-cert/--tls-key` does. The function must reach the
// bookies at the addresses they register in the catalog (run it in their
// VPC). Give it a reserved concurrency of 1: passes of two instances at
// once are safe (every catalog change is a compare-and-set) but do
// duplicate work.
//
// Build it as Lambda's provided.al2023 runtime expects:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./services/compactor/lambda
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/tlsconf"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/compactor"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// Opened once per execution environment and reused by its invocations;
	// an environment that fails to start answers every invocation with the
	// reason instead of crashing in a loop.
	c, err := open(context.Background(), log)
	if err != nil {
		log.Error("compactor function cannot start", slog.Any("err", err))
	}
	lambda.Start(func(ctx context.Context, ev events.CloudWatchEvent) (compactor.Report, error) {
		if err != nil {
			return compactor.Report{}, fmt.Errorf("compactor function cannot start: %w", err)
		}
		log.Info("scheduled pass", slog.String("event", ev.ID), slog.String("source", ev.Source), slog.Time("time", ev.Time))
		r, perr := c.Pass(ctx)
		if err := writeEMF(os.Stdout, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), r, time.Now()); err != nil {
			log.Warn("compactor metrics not written", slog.Any("err", err))
		}
		return r, perr
	})
}

// open builds the compactor from the environment.
func open(ctx context.Context, log *slog.Logger) (*compactor.Compactor, error) {
	cfg, err := compactor.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	table, objects := os.Getenv(compactor.EnvCatalogTable), os.Getenv(compactor.EnvObjects)
	if table == "" || objects == "" {
		return nil, errors.New(compactor.EnvCatalogTable + " and " + compactor.EnvObjects + " must be set")
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config for the catalog: %w", err)
	}
	cat, err := catdynamo.New(catdynamo.NewClient(awsCfg), catdynamo.Options{Table: table})
	if err != nil {
		return nil, err
	}
	bucket, err := objstore.Open(ctx, objects)
	if err != nil {
		return nil, err
	}
	bookieTLS, err := tlsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: log, TLS: bookieTLS})
	if err != nil {
		return nil, err
	}
	// The bucket and client live as long as the execution environment.
	return compactor.New(cfg, compactor.Deps{Catalog: cat, Ledgers: ledgers, Objects: bucket})
}

// tlsFromEnv is the TLS config toward bookies from SLUICE_TLS_* (nil when
// SLUICE_TLS_CA is unset).
func tlsFromEnv(getenv func(string) string) (*tls.Config, error) {
	ca, cert, key := getenv(compactor.EnvTLSCA), getenv(compactor.EnvTLSCert), getenv(compactor.EnvTLSKey)
	if ca == "" {
		if cert != "" || key != "" {
			return nil, errors.New(compactor.EnvTLSCert + " and " + compactor.EnvTLSKey + " need " + compactor.EnvTLSCA)
		}
		return nil, nil
	}
	cfg, err := tlsconf.Client{CAFile: ca, CertFile: cert, KeyFile: key}.Config()
	if err != nil {
		return nil, fmt.Errorf("%s/%s/%s: %w", compactor.EnvTLSCA, compactor.EnvTLSCert, compactor.EnvTLSKey, err)
	}
	return cfg, nil
}
