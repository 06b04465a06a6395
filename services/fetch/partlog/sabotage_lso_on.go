//go:build sabotage_lso

package partlog

// sabotageLSO (build tag sabotage_lso, chaos tests only): a read_committed read ignores the last stable offset and takes the batches of open transactions as committed (see txnFilter.take in txn.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageLSO = true
