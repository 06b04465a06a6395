// Package testenv tells integration tests where the real services are.
//
// `task test:integration` starts the local stack (localstack/stack.sh) and
// exports its addresses; tests ask for a service here. When a variable is
// missing a test is skipped on a developer's machine, but when CI=true it
// FAILS: a CI run that silently skipped the real services would prove
// nothing.
//
// Integration test files carry the `integration` build tag so that plain
// `go test ./...` stays hermetic and fast.
//
// It is test support (harness/README.md): tests, chaos/ and the other
// harnesses import it; nothing the services run does.
package testenv

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Environment variables set by `localstack/stack.sh env`.
const (
	EnvCassandra      = "SLUICE_TEST_CASSANDRA"       // host:port of the CQL native port
	EnvAWSEndpoint    = "SLUICE_TEST_AWS_ENDPOINT"    // base URL of the S3/DynamoDB emulator
	EnvLambdaEndpoint = "SLUICE_TEST_LAMBDA_ENDPOINT" // base URL of the Lambda Runtime Interface Emulator
	// EnvKafka is set by `localstack/kafka.sh env`, not stack.sh: Kafka is
	// the benchmarks' peer, started only for them.
	EnvKafka = "SLUICE_TEST_KAFKA" // comma-separated host:port bootstrap list of the 3 local brokers
	// EnvConfluentPython is set by `localstack/pyclients.sh env`: a Python
	// with Confluent's client (confluent-kafka, its schema registry client
	// and serializers) installed.
	EnvConfluentPython = "SLUICE_TEST_CONFLUENT_PYTHON"
)

// InCI reports whether CI=true (any value strconv.ParseBool reads as true).
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Require returns the value of the environment variable name, which names a
// service the test needs. Missing: t.Fatal under CI, t.Skip elsewhere.
func Require(t testing.TB, name, service string) string {
	t.Helper()
	return require(t, name, service, "start the stack with `task stack:up` and run `task test:integration`")
}

// require is Require with the advice on how to provide the service.
func require(t testing.TB, name, service, howTo string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	msg := service + " is not available: " + name + " is unset; " + howTo
	if InCI() {
		t.Fatal("CI=true and " + msg)
		return ""
	}
	t.Skip(msg)
	return ""
}

// Cassandra returns the host:port of a real Cassandra node.
func Cassandra(t testing.TB) string { return Require(t, EnvCassandra, "Cassandra") }

// AWSEndpoint returns the base URL of the S3/DynamoDB endpoint (moto or LocalStack).
func AWSEndpoint(t testing.TB) string { return Require(t, EnvAWSEndpoint, "the AWS emulator") }

// LambdaEndpoint returns the base URL of the Lambda Invoke API (the runtime interface emulator).
func LambdaEndpoint(t testing.TB) string { return Require(t, EnvLambdaEndpoint, "the Lambda emulator") }

// Kafka returns the bootstrap brokers of a real 3-broker Kafka cluster.
func Kafka(t testing.TB) []string {
	t.Helper()
	v := require(t, EnvKafka, "Kafka",
		"start it with `task kafka:up`, then `eval \"$(localstack/kafka.sh env)\"` (or run `task bench:kafka-smoke`)")
	return strings.Split(v, ",")
}

// ConfluentPython returns the python that has Confluent's client.
func ConfluentPython(t testing.TB) string {
	t.Helper()
	return require(t, EnvConfluentPython, "Confluent's Python client", "install it with `bash localstack/pyclients.sh install` and eval `bash localstack/pyclients.sh env`")
}

// AWSConfig returns an AWS SDK config aimed at endpoint with the emulator's
// dummy static credentials, so no real AWS account is ever touched.
func AWSConfig(t testing.TB, endpoint string) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(endpoint),
		config.WithRetryMaxAttempts(3),
	)
	if err != nil {
		t.Fatalf("aws config for %s: %v", endpoint, err)
	}
	return cfg
}
