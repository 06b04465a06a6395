package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
)

// The Cassandra TLS and authentication flags reach the driver: TLS with
// the CA and host verification, the client certificate, and the password
// authenticator with the password from the environment or a file — which
// no error repeats.
func TestCassandraSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Issue(t, dir, "sluice", 2)
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	f := cassandraFlags{tlsCA: caFile, tlsCert: cert, tlsKey: key, username: "sluice", pwFile: pwFile}
	hook, err := f.configure()
	if err != nil {
		t.Fatal(err)
	}
	cc := gocql.NewCluster("127.0.0.1")
	hook(cc)
	if cc.SslOpts == nil || !cc.SslOpts.EnableHostVerification || cc.SslOpts.Config == nil || cc.SslOpts.RootCAs == nil || cc.SslOpts.GetClientCertificate == nil {
		t.Fatalf("SslOpts %+v: want TLS with the CA, host verification and the client certificate", cc.SslOpts)
	}
	if pa, ok := cc.Authenticator.(gocql.PasswordAuthenticator); !ok || pa.Username != "sluice" || pa.Password != "s3cret-from-file" {
		t.Fatalf("Authenticator %T: want the password authenticator with the file's password", cc.Authenticator)
	}

	t.Setenv(cassandraPasswordEnv, "s3cret-from-env")
	hook, err = (&cassandraFlags{username: "sluice"}).configure()
	if err != nil {
		t.Fatal(err)
	}
	cc = gocql.NewCluster("127.0.0.1")
	hook(cc)
	if pa, _ := cc.Authenticator.(gocql.PasswordAuthenticator); pa.Password != "s3cret-from-env" || cc.SslOpts != nil {
		t.Fatalf("env password: %+v, TLS %v", cc.Authenticator, cc.SslOpts)
	}
	t.Setenv(cassandraPasswordEnv, "")
	if _, err := (&cassandraFlags{username: "sluice"}).configure(); err == nil || !strings.Contains(err.Error(), cassandraPasswordEnv) {
		t.Fatalf("no password: %v", err)
	}
	if hook, err := (&cassandraFlags{}).configure(); hook != nil || err != nil {
		t.Fatal("a hook without TLS or authentication")
	}
}
