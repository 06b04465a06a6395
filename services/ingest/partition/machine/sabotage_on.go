//go:build sabotage_dedup

package machine

// sabotageDedup (build tag sabotage_dedup, chaos tests only): the partition writer appends retried idempotent batches again instead of answering with their original offsets (see enqueue in machine.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageDedup = true
