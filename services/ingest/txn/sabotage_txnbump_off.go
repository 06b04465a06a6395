//go:build !sabotage_txnbump

package txn

// sabotageTxnBump is false in every real build; see sabotage_txnbump_on.go.
const sabotageTxnBump = false
