package embedded

import (
	"testing"

	"github.com/sluicemq/sluice/harness/benchclients"
)

// benchClients are the client counts of the benchmarks where concurrency
// means something.
var benchClients = []int{1, 16}

type benchClient = benchclients.Client

// runClients runs op as a benchmark over clients goroutines; see benchclients.Run.
func runClients(b *testing.B, clients int, op func(bc *benchClient) error) float64 {
	b.Helper()
	return benchclients.Run(b, clients, op)
}
