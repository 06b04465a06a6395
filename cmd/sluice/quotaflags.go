package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/quota"
)

// quotaFlags are the byte-rate quotas of the public servers: produce bytes
// (ingest) and fetched bytes (fetch) per principal — or, without
// authentication, per client id header — as Kafka's client quotas.
type quotaFlags struct {
	rate      int64
	overrides string

	cfg quota.Config // by check
}

func (f *quotaFlags) register(cmd *cobra.Command, what string) {
	fs := cmd.Flags()
	fs.Int64Var(&f.rate, "quota-bytes-per-second", 0, "byte-rate quota of "+what+" per principal (or client id without --auth): a caller over it has its answers delayed (0: unlimited)")
	fs.StringVar(&f.overrides, "quota-overrides", "", "per-principal quotas as KEY=BYTES_PER_SECOND,...: User:etl=50000000,User:batch=0 (0: unlimited)")
}

func (f *quotaFlags) check(c *flagCheck) {
	if f.rate < 0 {
		c.badf("--quota-bytes-per-second %d: want 0 (unlimited) or more", f.rate)
	}
	f.cfg = quota.Config{Default: quota.Quota{BytesPerSecond: f.rate}}
	for _, kv := range splitList(f.overrides) {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || k == "" || err != nil || n < 0 {
			c.badf("--quota-overrides: %q is not KEY=BYTES_PER_SECOND", kv)
			continue
		}
		if f.cfg.Overrides == nil {
			f.cfg.Overrides = map[string]quota.Quota{}
		}
		f.cfg.Overrides[k] = quota.Quota{BytesPerSecond: n}
	}
	if err := f.cfg.Validate(); err != nil {
		c.badf("--quota-bytes-per-second/--quota-overrides: %v", err)
	}
}
