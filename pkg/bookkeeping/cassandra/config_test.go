package cassandra

import (
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Hosts: []string{"db1"}}.withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Keyspace != "sluice" || c.Port != 9042 || c.Consistency != "LOCAL_QUORUM" || c.SerialConsistency != "LOCAL_SERIAL" ||
		c.Timeout != 5*time.Second || c.ProducerIDBlock != 1000 {
		t.Fatalf("defaults = %+v", c)
	}
	if got, want := c.Replication.cql(), "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}"; got != want {
		t.Fatalf("default replication %s, want %s", got, want)
	}
	cc := c.clusterConfig(c.Keyspace)
	if cc.Consistency != gocql.LocalQuorum || cc.SerialConsistency != gocql.LocalSerial || cc.Keyspace != "sluice" {
		t.Fatalf("driver config: consistency %v, serial %v, keyspace %q", cc.Consistency, cc.SerialConsistency, cc.Keyspace)
	}
}

func TestConfigConsistencyIsCaseInsensitive(t *testing.T) {
	c := Config{Hosts: []string{"db1"}, Consistency: "quorum", SerialConsistency: "serial"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if cc := c.withDefaults().clusterConfig("k"); cc.Consistency != gocql.Quorum || cc.SerialConsistency != gocql.Serial {
		t.Fatalf("consistency %v / %v, want QUORUM / SERIAL", cc.Consistency, cc.SerialConsistency)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := Config{
		Hosts:             []string{""},
		Port:              70000,
		Keyspace:          "Bad-Name",
		Consistency:       "ONE",
		SerialConsistency: "QUORUM",
		Timeout:           -time.Second,
		ProducerIDBlock:   -1,
		Replication:       Replication{Class: "SimpleStrategy", Factor: 11, DataCenters: map[string]int{"dc'1": 0}},
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"Hosts[0]", "Port 70000", "Keyspace", "Consistency \"ONE\"", "SerialConsistency \"QUORUM\"",
		"Timeout", "ProducerIDBlock", "DataCenters: only for", "DataCenters[\"dc'1\"]: want", "DataCenters[\"dc'1\"] = 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %q:\n%v", want, err)
		}
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Hosts") {
		t.Fatalf("Validate of a config without hosts: %v", err)
	}
}

func TestReplicationCQL(t *testing.T) {
	cases := []struct {
		r    Replication
		want string
	}{
		{Replication{Class: simpleStrategy, Factor: 1}, "{'class': 'SimpleStrategy', 'replication_factor': 1}"},
		{Replication{Class: networkTopology, DataCenters: map[string]int{"us-east": 3, "eu.west": 5}},
			"{'class': 'NetworkTopologyStrategy', 'eu.west': 5, 'us-east': 3}"},
	}
	for _, c := range cases {
		if errs := c.r.validate(); len(errs) != 0 {
			t.Fatalf("%+v: %v", c.r, errs)
		}
		if got := c.r.cql(); got != c.want {
			t.Fatalf("%+v renders %s, want %s", c.r, got, c.want)
		}
	}
}

func TestTTLNeverExpiresEarly(t *testing.T) {
	// A TTL of n seconds can expire after n-1 seconds and a bit; the TTL
	// must therefore exceed the timeout by at least one full second.
	for _, c := range []struct {
		timeout time.Duration
		want    int
	}{{time.Second, 2}, {1500 * time.Millisecond, 3}, {time.Minute, 61}} {
		got := ttlSeconds(c.timeout)
		if got != c.want || time.Duration(got-1)*time.Second < c.timeout {
			t.Fatalf("ttlSeconds(%v) = %d, want %d", c.timeout, got, c.want)
		}
	}
}
