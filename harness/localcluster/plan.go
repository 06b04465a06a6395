// Package localcluster runs Sluice as separate processes on one machine —
// bookies, ingest, fetch and compactor copies against the local stack's
// Cassandra and AWS emulator (localstack/stack.sh) — and knows the flags
// each of them needs. localstack/cluster.sh (`task cluster:up`) is its
// command line; the integration tests, bench/compare.sh and the chaos
// harness start their processes from the same Plan, so the documented
// command lines are the ones that run.
//
// It is test support (harness/README.md): nothing the services run
// imports it.
package localcluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
)

var identRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// Roles of the processes, which are also the `sluice` commands they run.
const (
	RoleBookie    = "bookie"
	RoleIngest    = "ingest"
	RoleFetch     = "fetch"
	RoleCompactor = "compactor"
)

// Defaults of Config.
const (
	DefaultBookies    = 3
	DefaultIngests    = 2
	DefaultFetches    = 1
	DefaultCompactors = 1
	DefaultHost       = "127.0.0.1"
	// DefaultBasePort: bookie-N listens on BasePort+N, ingest-N on
	// BasePort+20+N, fetch-N on BasePort+40+N (17501.., 17521.., 17541..).
	DefaultBasePort = 17500
	DefaultTable    = "sluice-local"
	DefaultKeyspace = "sluice_local"
	DefaultBucket   = "sluice-local"
	DefaultRegion   = "us-east-1"
	// maxPerRole keeps the port ranges apart (20 ports per role).
	maxPerRole = 19
)

// Config describes a local cluster. Zero fields take the defaults above,
// except Fetches and Compactors, where zero means none (DefaultConfig has
// the defaults for them too); Normalize fills them in and checks the rest.
type Config struct {
	Bookies    int // sluice bookie processes (at least 3: topics default to 3 copies)
	Ingests    int // sluice ingest processes (at least 1)
	Fetches    int // sluice fetch processes (0: none)
	Compactors int // sluice compactor processes (0: none, or 1)

	Host     string // the loopback address every process listens on
	BasePort int    // see DefaultBasePort

	// Dir holds each bookie's data (Dir/data/bookie-N); required.
	Dir string

	Table    string // DynamoDB catalog table (ingest-1 creates it)
	Keyspace string // Cassandra keyspace (ingest-1 creates and migrates it)
	// ReplicationFactor of the keyspace when it is created: 1 for the
	// single local Cassandra node.
	ReplicationFactor int
	Bucket            string // S3 bucket the compactor offloads to and fetch reads from
	Region            string

	AWSEndpoint    string // S3 and DynamoDB endpoint (the AWS emulator); required
	Cassandra      string // Cassandra contact point host:port; required
	LambdaEndpoint string // Lambda Invoke endpoint for triggers; empty: none

	Pprof bool // serve /debug/pprof on every listener (benchmarks)
	// NoIngestBookkeeping runs the ingest copies without Cassandra: no
	// InitProducer (SDK producers pick random ids) and no transactions.
	// For the chaos scenarios that predate them.
	NoIngestBookkeeping bool

	// TLS, when set, runs every process with TLS (docs/DESIGN.md §2.12).
	TLS *TLS `json:",omitempty"`

	// Extra flags appended to every process of a role (RoleBookie, ...).
	Extra map[string][]string
	// AddrOf, when set, chooses the listening address of a named process
	// (bookie-1, ingest-2, ...) instead of the BasePort scheme: the chaos
	// harness takes free ports.
	AddrOf func(name string) string `json:"-"`
}

// TLS is the certificate files of a cluster with TLS: one certificate for
// every process (valid for both server and client authentication, for
// Host), bookies with mTLS, ingest and fetch serving HTTPS only, and every
// call between processes over mTLS.
type TLS struct {
	CAFile, CertFile, KeyFile string
	// ClientCAFile, if set, holds the CAs of clients' certificates
	// (--tls-client-ca of ingest and fetch).
	ClientCAFile string
	// ClientAuth is --tls-client-auth of ingest and fetch: require
	// (default) or request.
	ClientAuth string
}

// DefaultConfig is the cluster `task cluster:up` starts: 3 bookies, 2
// ingest copies, 1 fetch copy and 1 compactor (the other fields are zero
// and take their defaults).
func DefaultConfig() Config {
	return Config{Bookies: DefaultBookies, Ingests: DefaultIngests, Fetches: DefaultFetches, Compactors: DefaultCompactors}
}

// Proc is one process of the plan.
type Proc struct {
	Name string   `json:"name"` // bookie-1, ingest-1, fetch-1, compactor-1
	Role string   `json:"role"` // the sluice command
	Addr string   `json:"addr"` // where it listens; empty for the compactor (no listener)
	Args []string `json:"args"` // argv after the binary, starting with the role
}

// Normalize returns cfg with its defaults filled in, or the first thing
// wrong with it.
func (cfg Config) Normalize() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defS := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&cfg.Bookies, DefaultBookies)
	def(&cfg.Ingests, DefaultIngests)
	def(&cfg.BasePort, DefaultBasePort)
	def(&cfg.ReplicationFactor, 1)
	defS(&cfg.Host, DefaultHost)
	defS(&cfg.Table, DefaultTable)
	defS(&cfg.Keyspace, DefaultKeyspace)
	defS(&cfg.Bucket, DefaultBucket)
	defS(&cfg.Region, DefaultRegion)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	count := func(name string, v, lo int) {
		if v < lo || v > maxPerRole {
			bad("%s %d outside [%d, %d]", name, v, lo, maxPerRole)
		}
	}
	count("bookies", cfg.Bookies, 3)
	count("ingests", cfg.Ingests, 1)
	count("fetches", cfg.Fetches, 0)
	if cfg.Compactors < 0 || cfg.Compactors > 1 {
		bad("compactors %d outside [0, 1] (passes of two compactors would race for the same ledgers)", cfg.Compactors)
	}
	if cfg.BasePort < 1024 || cfg.BasePort > 65535-3*20 {
		bad("base port %d outside [1024, %d]", cfg.BasePort, 65535-3*20)
	}
	if !identRE.MatchString(cfg.Keyspace) {
		bad("keyspace %q is not a Cassandra name (a letter, then letters, digits or _; at most 48)", cfg.Keyspace)
	}
	if cfg.Dir == "" {
		bad("no directory for the processes' data")
	}
	if cfg.AWSEndpoint == "" {
		bad("no AWS endpoint (the catalog is on DynamoDB, segments on S3): start the stack with localstack/stack.sh up")
	}
	if cfg.Cassandra == "" && (cfg.Fetches > 0 || !cfg.NoIngestBookkeeping) {
		bad("no Cassandra contact point (producer ids, transactions, consumer groups): start the stack with localstack/stack.sh up")
	}
	if t := cfg.TLS; t != nil && (t.CAFile == "" || t.CertFile == "" || t.KeyFile == "") {
		bad("TLS needs the CA, certificate and key files")
	}
	for role := range cfg.Extra {
		switch role {
		case RoleBookie, RoleIngest, RoleFetch, RoleCompactor:
		default:
			bad("extra flags for unknown role %q", role)
		}
	}
	return cfg, errors.Join(errs...)
}

// ObjectsURL is the --objects value of the compactor and fetch copies.
func (cfg Config) ObjectsURL() string {
	cfg, _ = cfg.Normalize() // the defaults; errors are Plan's to report
	q := url.Values{"region": {cfg.Region}}
	if cfg.AWSEndpoint != "" {
		q.Set("endpoint", cfg.AWSEndpoint)
		q.Set("use_path_style", "true")
	}
	return (&url.URL{Scheme: "s3", Host: cfg.Bucket, RawQuery: q.Encode()}).String()
}

// Env is the environment every process needs besides its flags: the AWS
// endpoint and region (credentials come from the caller's environment or
// the SDK's default chain).
func (cfg Config) Env() []string {
	cfg, _ = cfg.Normalize()
	env := []string{"AWS_REGION=" + cfg.Region}
	if cfg.AWSEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL="+cfg.AWSEndpoint)
	}
	return env
}

func (cfg Config) addr(name string, role int, n int) string {
	if cfg.AddrOf != nil {
		return cfg.AddrOf(name)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.BasePort+20*role+n))
}

// Plan returns the processes of cfg in start order: ingest-1 first (it
// creates the catalog table and the keyspace that everything else uses),
// then the bookies, the other ingest copies, the fetch copies and the
// compactor.
func (cfg Config) Plan() ([]Proc, error) {
	cfg, err := cfg.Normalize()
	if err != nil {
		return nil, err
	}
	with := func(role string, args ...string) []string {
		if cfg.Pprof && role != RoleCompactor {
			args = append(args, "--pprof")
		}
		if t := cfg.TLS; t != nil {
			args = append(args, "--tls-cert", t.CertFile, "--tls-key", t.KeyFile, "--tls-ca", t.CAFile)
			if role == RoleIngest || role == RoleFetch {
				if t.ClientCAFile != "" {
					args = append(args, "--tls-client-ca", t.ClientCAFile)
				}
				if t.ClientAuth != "" {
					args = append(args, "--tls-client-auth", t.ClientAuth)
				}
			}
		}
		return append(args, cfg.Extra[role]...)
	}
	cassandra := []string{"--cassandra", cfg.Cassandra, "--keyspace", cfg.Keyspace,
		"--replication-factor", strconv.Itoa(cfg.ReplicationFactor)}
	ingest := func(n int) Proc {
		name := "ingest-" + strconv.Itoa(n)
		p := Proc{Name: name, Role: RoleIngest, Addr: cfg.addr(name, 1, n)}
		args := []string{RoleIngest, "--id", name, "--addr", p.Addr, "--catalog-table", cfg.Table}
		if n == 1 {
			args = append(args, "--create-table")
		}
		if !cfg.NoIngestBookkeeping {
			args = append(args, cassandra...)
		}
		p.Args = with(RoleIngest, args...)
		return p
	}
	procs := []Proc{ingest(1)}
	for n := 1; n <= cfg.Bookies; n++ {
		name := "bookie-" + strconv.Itoa(n)
		p := Proc{Name: name, Role: RoleBookie, Addr: cfg.addr(name, 0, n)}
		p.Args = with(RoleBookie, RoleBookie, "--id", name, "--addr", p.Addr,
			"--dir", filepath.Join(cfg.Dir, "data", name), "--catalog-table", cfg.Table)
		procs = append(procs, p)
	}
	for n := 2; n <= cfg.Ingests; n++ {
		procs = append(procs, ingest(n))
	}
	for n := 1; n <= cfg.Fetches; n++ {
		name := "fetch-" + strconv.Itoa(n)
		p := Proc{Name: name, Role: RoleFetch, Addr: cfg.addr(name, 2, n)}
		args := []string{RoleFetch, "--addr", p.Addr, "--catalog-table", cfg.Table}
		args = append(args, cassandra...)
		args = append(args, "--objects", cfg.ObjectsURL(), "--ingest-address", procs[0].Addr)
		if cfg.LambdaEndpoint != "" {
			args = append(args, "--lambda-endpoint", cfg.LambdaEndpoint)
		}
		p.Args = with(RoleFetch, args...)
		procs = append(procs, p)
	}
	for n := 1; n <= cfg.Compactors; n++ {
		procs = append(procs, Proc{Name: "compactor-" + strconv.Itoa(n), Role: RoleCompactor,
			Args: with(RoleCompactor, RoleCompactor, "--catalog-table", cfg.Table, "--objects", cfg.ObjectsURL())})
	}
	return procs, nil
}
