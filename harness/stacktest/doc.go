// Package stacktest holds the smoke tests of the real local stack: one
// Cassandra node, the S3/DynamoDB emulator (moto) and AWS's Lambda Runtime
// Interface Emulator running the example aws-lambda-go function in
// internal/functions/echo. They prove each service does what Sluice will rely
// on (LWT, TTL, conditional writes, transactions, ranged reads, Invoke) before
// any Sluice code depends on it.
//
// The tests carry the `integration` build tag; run them with
// `task test:integration`, which starts the stack and sets the addresses.
//
// It is test support (harness/README.md): the package is only its tests.
package stacktest
