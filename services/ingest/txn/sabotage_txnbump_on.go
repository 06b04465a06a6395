//go:build sabotage_txnbump

package txn

// sabotageTxnBump (build tag sabotage_txnbump, chaos tests only): EndTxn does not bump the epoch (KIP-890's per-transaction bump; see endTxn in machine.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageTxnBump = true
