//go:build race

package balance

// raceEnabled: the race detector slows these single-goroutine property
// tests about tenfold and finds nothing in them, so they run fewer seeds.
const raceEnabled = true
