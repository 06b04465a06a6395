// Package processtest runs the consume path as real processes: a `sluice
// fetch` copy keeping group leases and offsets in a real Cassandra, next to
// three `sluice bookie` and one `sluice ingest` processes sharing a DynamoDB
// catalog (moto in tests), with `sluice consume --group` processes as the
// group's members. Members are killed with SIGKILL, paused with SIGSTOP past
// their session timeout and added while records flow; the tests check the
// leases move in time, nothing is skipped and a paused member cannot commit.
// Its tests carry the integration build tag.
package processtest
