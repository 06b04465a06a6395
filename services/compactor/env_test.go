package compactor

import (
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{EnvOffloadAge: "90s", EnvBookieDeleteGrace: "-1ns", EnvWorkers: "8", EnvPrefix: "p/"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.OffloadAge != 90*time.Second || cfg.BookieDeleteGrace != -1 || cfg.Workers != 8 || cfg.Prefix != "p/" {
		t.Fatalf("cfg = %+v, %v", cfg, err)
	}
	env = map[string]string{EnvOffloadAge: "soon", EnvWorkers: "many"}
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), EnvOffloadAge) || !strings.Contains(err.Error(), EnvWorkers) {
		t.Fatalf("bad values: %v", err)
	}
	env = map[string]string{EnvWorkers: "1000"}
	if _, err = ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "Workers") {
		t.Fatalf("out of range: %v", err)
	}
}
