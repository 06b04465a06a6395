package compactor

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Environment variables of a compactor configured by its environment (the
// Lambda function): the settings ConfigFromEnv reads, and the stores its
// main opens.
const (
	EnvCatalogTable      = "SLUICE_CATALOG_TABLE"                  // DynamoDB catalog table (required by the Lambda)
	EnvObjects           = "SLUICE_OBJECTS"                        // object store URL, pkg/objstore (required by the Lambda)
	EnvOffloadAge        = "SLUICE_COMPACTOR_OFFLOAD_AGE"          // Go duration
	EnvBookieDeleteGrace = "SLUICE_COMPACTOR_BOOKIE_DELETE_GRACE"  // Go duration
	EnvDeleteGrace       = "SLUICE_COMPACTOR_DELETE_GRACE"         // Go duration
	EnvOrphanGrace       = "SLUICE_COMPACTOR_ORPHAN_GRACE"         // Go duration
	EnvPassTimeout       = "SLUICE_COMPACTOR_PASS_TIMEOUT"         // Go duration
	EnvCompactInterval   = "SLUICE_COMPACTOR_COMPACT_INTERVAL"     // Go duration
	EnvTombstoneDelay    = "SLUICE_COMPACTOR_TOMBSTONE_DELAY"      // Go duration
	EnvWorkers           = "SLUICE_COMPACTOR_WORKERS"              // integer
	EnvMaxLedgersPerPass = "SLUICE_COMPACTOR_MAX_LEDGERS_PER_PASS" // integer
	EnvPrefix            = "SLUICE_COMPACTOR_PREFIX"               // object key prefix
	// EnvRereplicateGrace: a Lambda's memory of when a bookie went missing
	// lasts while its execution environment does, so a cold start waits
	// the grace again.
	EnvRereplicateGrace     = "SLUICE_COMPACTOR_REREPLICATE_GRACE"       // Go duration
	EnvRereplicateMiBPerSec = "SLUICE_COMPACTOR_REREPLICATE_MIB_PER_SEC" // integer
	// The Lambda's TLS toward bookies with mTLS (the flags --tls-ca,
	// --tls-cert, --tls-key of `sluice compactor`): PEM files in the
	// deployment package or a layer.
	EnvTLSCA   = "SLUICE_TLS_CA"
	EnvTLSCert = "SLUICE_TLS_CERT"
	EnvTLSKey  = "SLUICE_TLS_KEY"
)

// ConfigFromEnv reads the EnvXxx settings through getenv (os.Getenv); unset
// ones keep their zero value (the default). It reports every unparsable
// value and then validates the result.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []error
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a duration (like 90s or 10m)", name, v))
			}
			*dst = d
		}
	}
	num := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not an integer", name, v))
			}
			*dst = n
		}
	}
	dur(EnvOffloadAge, &cfg.OffloadAge)
	dur(EnvBookieDeleteGrace, &cfg.BookieDeleteGrace)
	dur(EnvDeleteGrace, &cfg.DeleteGrace)
	dur(EnvOrphanGrace, &cfg.OrphanGrace)
	dur(EnvPassTimeout, &cfg.PassTimeout)
	dur(EnvCompactInterval, &cfg.CompactInterval)
	dur(EnvTombstoneDelay, &cfg.TombstoneDelay)
	num(EnvWorkers, &cfg.Workers)
	num(EnvMaxLedgersPerPass, &cfg.MaxLedgersPerPass)
	dur(EnvRereplicateGrace, &cfg.RereplicateGrace)
	var mib int
	num(EnvRereplicateMiBPerSec, &mib)
	cfg.RereplicateBytesPerSec = int64(mib) << 20
	cfg.Prefix = getenv(EnvPrefix)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, cfg.Validate()
}
