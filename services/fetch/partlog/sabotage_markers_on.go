//go:build sabotage_markers

package partlog

// sabotageMarkers (build tag sabotage_markers, chaos tests only): a read_committed read shows the batches of aborted transactions (it ignores their markers; see txnFilter.take in txn.go).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageMarkers = true
