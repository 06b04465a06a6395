//go:build !sabotage_commitepoch

package cassandra

// sabotageCommitEpoch is false in every real build. The chaos harness builds a binary
// with the tag sabotage_commitepoch (see sabotage_on.go) to prove its scenario
// detects the mechanism missing; the constant lets the compiler drop the
// sabotaged branch here.
const sabotageCommitEpoch = false

// unfencedCommit is never sent by a real build (see sabotage_on.go).
const unfencedCommit = ""
