// Package sabotagetest holds the chaos harness's sabotage checks: each
// builds `sluice` with a tag that disables one safety mechanism and runs
// the scenario that exercises it, which must then report anomalies. It is
// a package of its own so that its runs and the regular scenarios' fit the
// test binary's default timeout each (and may run side by side).
package sabotagetest
