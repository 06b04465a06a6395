// Package harness runs Sluice's chaos scenarios: it starts a cluster of
// real processes on loopback (bookies, ingest and fetch copies, built from
// this checkout, optionally with a sabotage build tag), drives idempotent
// producers and consumer-group members that record every client-side
// observation in a history (chaos/history), injects faults through
// chaos/fault, heals, drains every partition, and judges the history with
// chaos/checker.
//
// The harness takes its services (the AWS emulator for the catalog,
// Cassandra for groups) from the caller; integration tests take them from
// harness/testenv. The catalog is reached through a serialising proxy:
// moto's DynamoDB is not safe under concurrent requests (docs/testing.md), and
// here up to eight processes share it.
//
// Every loop is bounded in time (the scenario's duration and the context)
// and in count (fault budget, records per producer); every goroutine is
// owned by the component that started it and waited for by its stop.
package harness
