// Package processtest runs the consume path as real processes: a `sluice
// fetch` copy keeping group leases and offsets in a real Cassandra, next to
// three `sluice bookie` and one `sluice ingest` processes sharing a DynamoDB
// catalog (moto in tests), with `sluice consume --group` processes as the
// group's members. Members are killed with SIGKILL, paused with SIGSTOP past
// their session timeout and added while records flow; the tests check the
// leases move in time, nothing is skipped and a paused member cannot commit.
//
// The trigger tests run two fetch copies invoking the recorder function
// (internal/functions/recorder) under a real Runtime Interface Emulator
// pool (harness/lambdatest), through a proxy that notes which
// copy sent which invocation id; a copy is paused, killed or stopped while
// an invocation is in flight, and the tests check from the recorder's
// files, the proxy, bookkeeping and DescribeTrigger that every record ran,
// only the round in flight ran again (under the same invocation id), and
// no commit went backwards; and that poison records and throttling are
// handled under the emulator.
//
// Its tests carry the integration build tag.
package processtest
