//go:build race

package membership_test

// raceEnabled: the race detector slows the single-goroutine simulation
// several times over and can find nothing in it, so it runs fewer seeds.
const raceEnabled = true
