package localcluster

import (
	"slices"
	"strings"
	"testing"
)

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Dir, cfg.AWSEndpoint, cfg.Cassandra = "/c", "http://127.0.0.1:4566", "127.0.0.1:9042"
	return cfg
}

func names(procs []Proc) []string {
	var out []string
	for _, p := range procs {
		out = append(out, p.Name+"@"+p.Addr)
	}
	return out
}

func TestPlanDefault(t *testing.T) {
	procs, err := testConfig().Plan()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ingest-1@127.0.0.1:17521", "bookie-1@127.0.0.1:17501", "bookie-2@127.0.0.1:17502",
		"bookie-3@127.0.0.1:17503", "ingest-2@127.0.0.1:17522", "fetch-1@127.0.0.1:17541", "compactor-1@"}
	if got := names(procs); !slices.Equal(got, want) {
		t.Fatalf("plan:\n got %v\nwant %v", got, want)
	}
	for _, p := range procs {
		if p.Args[0] != p.Role {
			t.Errorf("%s runs %q, want its role %q", p.Name, p.Args[0], p.Role)
		}
		creates := slices.Contains(p.Args, "--create-table")
		if creates != (p.Name == "ingest-1") {
			t.Errorf("%s: --create-table %v; only ingest-1, started first and alone, creates the table", p.Name, creates)
		}
		if !containsPair(p.Args, "--catalog-table", DefaultTable) {
			t.Errorf("%s: no --catalog-table %s: %v", p.Name, DefaultTable, p.Args)
		}
	}
	fetch := procs[5].Args
	for _, pair := range [][2]string{{"--ingest-address", "127.0.0.1:17521"}, {"--keyspace", DefaultKeyspace},
		{"--replication-factor", "1"}, {"--objects", "s3://sluice-local?endpoint=http%3A%2F%2F127.0.0.1%3A4566&region=us-east-1&use_path_style=true"}} {
		if !containsPair(fetch, pair[0], pair[1]) {
			t.Errorf("fetch-1 lacks %s %s: %v", pair[0], pair[1], fetch)
		}
	}
	if !containsPair(procs[1].Args, "--dir", "/c/data/bookie-1") {
		t.Errorf("bookie-1's data is not under Dir: %v", procs[1].Args)
	}
}

func containsPair(args []string, flag, value string) bool {
	i := slices.Index(args, flag)
	return i >= 0 && i+1 < len(args) && args[i+1] == value
}

func TestPlanExtraAddrOfAndPprof(t *testing.T) {
	cfg := testConfig()
	cfg.Bookies, cfg.Ingests, cfg.Fetches, cfg.Compactors = 4, 1, 0, 0
	cfg.Pprof = true
	cfg.Extra = map[string][]string{RoleBookie: {"--heartbeat", "1s"}}
	cfg.AddrOf = func(name string) string { return "h:" + name }
	procs, err := cfg.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(procs), []string{"ingest-1@h:ingest-1", "bookie-1@h:bookie-1", "bookie-2@h:bookie-2",
		"bookie-3@h:bookie-3", "bookie-4@h:bookie-4"}; !slices.Equal(got, want) {
		t.Fatalf("plan: got %v want %v", got, want)
	}
	b := strings.Join(procs[4].Args, " ")
	if !strings.HasSuffix(b, "--pprof --heartbeat 1s") || !strings.Contains(b, "--addr h:bookie-4") {
		t.Errorf("bookie-4: %s", b)
	}
	if slices.Contains(procs[0].Args, "--heartbeat") {
		t.Errorf("a bookie flag reached ingest-1: %v", procs[0].Args)
	}
}

func TestPlanRefusesBadConfigs(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"two bookies", func(c *Config) { c.Bookies = 2 }, "bookies 2 outside [3, 19]"},
		{"two compactors", func(c *Config) { c.Compactors = 2 }, "compactors 2 outside [0, 1]"},
		{"too many fetches", func(c *Config) { c.Fetches = 20 }, "fetches 20 outside [0, 19]"},
		{"no AWS", func(c *Config) { c.AWSEndpoint = "" }, "no AWS endpoint"},
		{"no Cassandra", func(c *Config) { c.Cassandra = "" }, "no Cassandra"},
		{"no dir", func(c *Config) { c.Dir = "" }, "no directory"},
		{"keyspace", func(c *Config) { c.Keyspace = "x; DROP" }, "is not a Cassandra name"},
		{"port", func(c *Config) { c.BasePort = 80 }, "base port 80"},
		{"role", func(c *Config) { c.Extra = map[string][]string{"broker": {"-x"}} }, `unknown role "broker"`},
	} {
		cfg := testConfig()
		tc.mod(&cfg)
		_, err := cfg.Plan()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
