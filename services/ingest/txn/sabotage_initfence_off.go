//go:build !sabotage_initfence

package txn

// sabotageInitFence is false in every real build; see sabotage_initfence_on.go.
const sabotageInitFence = false
