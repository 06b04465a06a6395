//go:build !sabotage_fsync

package journal

// sabotageFsync is false in every real build. The chaos harness builds a
// binary with the tag sabotage_fsync (see sabotage_on.go) to prove its
// scenario detects the mechanism missing; the constant lets the compiler
// drop the sabotaged branch in writer.go.
const sabotageFsync = false
