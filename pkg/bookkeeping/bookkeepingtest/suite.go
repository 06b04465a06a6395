package bookkeepingtest

import (
	"testing"
)

// Run runs the whole conformance suite against the backend h opens.
func Run(t *testing.T, h Harness) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Members", memberTests},
		{"Leases", leaseTests},
		{"Offsets", offsetTests},
		{"Groups", groupTests},
		{"Producers", producerTests},
		{"Transactions", transactionTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, newEnv(t, h))
				})
			}
		})
	}
}

type test struct {
	name string
	run  func(t *testing.T, e *env)
}
