//go:build !sabotage_dedup

package machine

// sabotageDedup is false in every real build. The chaos harness builds a binary
// with the tag sabotage_dedup (see sabotage_on.go) to prove its scenario
// detects the mechanism missing; the constant lets the compiler drop the
// sabotaged branch here.
const sabotageDedup = false
