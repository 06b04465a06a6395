// Package promtool pins promtool, Prometheus's rule checker and rule unit
// test runner, built from the Prometheus Go module (its own module, so its
// dependencies never move the main module's or the other tools'):
//
//	go tool -modfile=internal/tools/promtool/go.mod promtool check rules infra/observability/prometheus/sluice-alerts.yml
//
// infra/observability's integration test runs it.
package promtool
