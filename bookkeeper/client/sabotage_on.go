//go:build sabotage_rereplicate

package client

// sabotageRereplicate (build tag sabotage_rereplicate, chaos tests only):
// Rereplicate points the catalog at the new bookie without writing any
// copy to it — re-replication that updates the ensemble before (here:
// without) the copy, so a later loss of the remaining copies loses data.
// Never ship this build: it exists so that chaos/harness can show that its
// lose-bookies scenario fails without the mechanism.
const sabotageRereplicate = true
