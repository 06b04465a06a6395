//go:build sabotage_fencing

package storage

// sabotageFencing (build tag sabotage_fencing, chaos tests only): bookies accept normal adds to fenced ledgers, so a writer that lost its ledger to recovery keeps writing (see ledgers.go AddEntry).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageFencing = true
