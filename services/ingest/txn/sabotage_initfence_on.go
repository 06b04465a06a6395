//go:build sabotage_initfence

package txn

// sabotageInitFence (build tag sabotage_initfence, chaos tests only): InitProducer gives a transactional id's current session again (same epoch, an open transaction left open) instead of fencing it (see initProducer in machine.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageInitFence = true
