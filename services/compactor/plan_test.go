package compactor

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// sizeTrimCount against a naive model: the largest n such that every
// dropped ledger has a known size, the tail stays, and after dropping n
// the known total is still at least the limit.
func TestSizeTrimCountMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		sizes := make([]int64, rng.IntN(8))
		for j := range sizes {
			sizes[j] = rng.Int64N(100)
			if rng.IntN(6) == 0 {
				sizes[j] = -1
			}
		}
		limit := rng.Int64N(400) + 1
		if rng.IntN(10) == 0 {
			limit = catalog.Unlimited
		}
		got := sizeTrimCount(sizes, limit)
		want := 0
		for n := 1; n < len(sizes) && limit != catalog.Unlimited; n++ {
			ok := true
			var rest int64
			for j, s := range sizes {
				if j < n && s < 0 {
					ok = false
				}
				if j >= n {
					rest += max(s, 0)
				}
			}
			if !ok || rest < limit {
				break
			}
			want = n
		}
		if got != want {
			t.Fatalf("case %d: sizeTrimCount(%v, %d) = %d, want %d", i, sizes, limit, got, want)
		}
	}
}

func TestTimeExpiredAndTrimmable(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	sealed := catalog.LedgerMetadata{State: catalog.LedgerOffloaded, ClosedAt: now.Add(-2 * time.Minute)}
	open := catalog.LedgerMetadata{State: catalog.LedgerOpen}
	if !timeExpired(sealed, 60_000, now) || timeExpired(sealed, 180_000, now) || timeExpired(sealed, catalog.Unlimited, now) || timeExpired(open, 1, now) {
		t.Fatal("timeExpired")
	}
	front := []catalog.LedgerMetadata{sealed, sealed, open, sealed}
	for _, c := range []struct{ front, chain, want int }{{4, 5, 2}, {2, 2, 1}, {2, 3, 2}, {0, 3, 0}, {1, 1, 0}} {
		if got := trimmable(front[:c.front], c.chain); got != c.want {
			t.Errorf("trimmable(%d of chain %d) = %d, want %d", c.front, c.chain, got, c.want)
		}
	}
}
