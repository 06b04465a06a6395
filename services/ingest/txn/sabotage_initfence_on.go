//go:build sabotage_initfence

package txn

// sabotageInitFence (build tag sabotage_initfence, chaos tests only): InitProducer bumps the epoch but does not abort the previous session's open transaction: the new session carries it on, and its commit commits what the fenced session wrote (see initProducer in machine.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageInitFence = true
