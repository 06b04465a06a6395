package harness

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/harness/testenv"
)

// DefaultScale is the fault-phase multiplier of the short version (the
// integration tier in CI); `task chaos` runs the full version with a
// larger CHAOS_SCALE.
const DefaultScale = 0.35

// EnvFromEnviron returns the Env of a chaos test run with the binary bin,
// its services from harness/testenv (failing under CI=true when one is
// missing), and these optional variables:
//
//	CHAOS_SEED       the run's seed (default 1)
//	CHAOS_SCALE      fault-phase multiplier (default DefaultScale)
//	CHAOS_OUT        where histories, reports and the test log go (default a temp dir)
//	CHAOS_RESULTS    where summary.md and summary.json go (default CHAOS_OUT)
//
// and, read by the tests: CHAOS_SCENARIOS (comma-separated scenario
// names, default all) and CHAOS_SABOTAGE (comma-separated tags, default
// all).
func EnvFromEnviron(t testing.TB, bin string) Env {
	t.Helper()
	env := Env{Bin: bin, AWSEndpoint: testenv.AWSEndpoint(t), Cassandra: testenv.Cassandra(t), Seed: 1, Scale: DefaultScale, Out: os.Getenv("CHAOS_OUT")}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		env.Seed = n
	}
	if s := os.Getenv("CHAOS_SCALE"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 20 {
			t.Fatalf("CHAOS_SCALE=%q: want a number in (0, 20]", s)
		}
		env.Scale = f
	}
	if env.Out == "" {
		env.Out = t.TempDir()
	}
	return env
}

// ResultsDir is where a run's summary goes: CHAOS_RESULTS, else env.Out.
func ResultsDir(env Env) string {
	if d := os.Getenv("CHAOS_RESULTS"); d != "" {
		return d
	}
	return env.Out
}

// Selected reports whether name is in the comma-separated list (an empty
// list selects everything).
func Selected(list, name string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}
