//go:build !sabotage_fencing

package storage

// sabotageFencing is false in every real build. The chaos harness builds a binary
// with the tag sabotage_fencing (see sabotage_on.go) to prove its scenario
// detects the mechanism missing; the constant lets the compiler drop the
// sabotaged branch here.
const sabotageFencing = false
