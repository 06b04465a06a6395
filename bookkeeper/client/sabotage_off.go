//go:build !sabotage_rereplicate

package client

// sabotageRereplicate is false in every real build; chaos tests build
// with the tag sabotage_rereplicate (see sabotage_on.go) to prove that
// their lose-bookies scenario catches a broken re-replication.
const sabotageRereplicate = false
