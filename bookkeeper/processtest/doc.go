// Package processtest runs the ledger tier as real processes: `sluice bookie`
// binaries on their own data directories, killed with SIGKILL and restarted
// while a writer appends (issue [bookkeeper], "Real processes"). Its tests
// carry the integration build tag; they need nothing but a Go toolchain.
package processtest
