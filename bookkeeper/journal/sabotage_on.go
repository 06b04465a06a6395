//go:build sabotage_fsync

package journal

// sabotageFsync (build tag sabotage_fsync, chaos tests only): the journal
// acknowledges a group without fsyncing it (see writer.go), so a crash that
// loses unsynced data loses acknowledged entries.
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageFsync = true
