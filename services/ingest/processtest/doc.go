// Package processtest runs the produce path as real processes: `sluice
// bookie` and `sluice ingest` binaries sharing a DynamoDB catalog (moto in
// tests), with ingest copies killed with SIGKILL under idempotent load.
// Its tests carry the integration build tag.
package processtest
