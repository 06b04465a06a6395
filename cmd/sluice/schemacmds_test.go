package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/services/registry"
)

func schemaServer(t *testing.T) string {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	svc, err := registry.New(cat)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// sluice schema register, get, list, check and delete against a registry,
// flags before or after the values, with the errors a user can act on.
func TestSchemaCommands(t *testing.T) {
	addr := schemaServer(t)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := file("v1.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`)
	v2 := file("v2.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1}]}`)
	bad := file("bad.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`)
	ok := func(want string, args ...string) {
		t.Helper()
		code, out, stderr := runCLI(args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want %q in stdout", args, code, out, stderr, want)
		}
	}
	fails := func(wantCode int, want string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(args...)
		if code != wantCode || !strings.Contains(stderr, want) {
			t.Fatalf("%q: exit %d, stderr %q; want exit %d and %q", args, code, stderr, wantCode, want)
		}
	}
	ok("subject orders-value version 1: schema id 1", "schema", "register", "--addr", addr, "orders-value", "--file", v1)
	ok("subject orders-value version 1: schema id 1", "schema", "register", "orders-value", "--file", v1, "--addr", addr)
	ok("compatible", "schema", "check", "orders-value", "--file", v2, "--addr", addr)
	fails(1, "the schema may not follow orders-value", "schema", "check", "orders-value", "--file", bad, "--addr", addr)
	if _, out, _ := runCLI("schema", "check", "orders-value", "--file", bad, "--addr", addr); !strings.HasPrefix(out, "incompatible:\n  the new schema cannot read data written with version 1") {
		t.Fatalf("check's reasons: %q", out)
	}
	fails(1, "Schema being registered is incompatible", "schema", "register", "orders-value", "--file", bad, "--addr", addr)
	ok("subject orders-value version 2: schema id 2", "schema", "register", "orders-value", "--file", v2, "--addr", addr)
	ok("subject orders-value version 2\nschema id 2 (AVRO)\n{", "schema", "get", "orders-value", "--addr", addr)
	ok("subject orders-value version 1\nschema id 1 (AVRO)\n", "schema", "get", "orders-value", "--version", "1", "--addr", addr)
	ok("schema id 2 (AVRO)\n", "schema", "get", "--id", "2", "--addr", addr)
	ok("orders-value\n", "schema", "list", "--addr", addr)
	ok("1\n2\n", "schema", "list", "orders-value", "--addr", addr)
	fails(1, "'sluice schema list' lists the subjects", "schema", "get", "nope", "--addr", addr)
	fails(1, "(delete it without --permanent first)", "schema", "delete", "orders-value", "--version", "1", "--permanent", "--addr", addr)
	ok("deleted subject orders-value version 1 softly", "schema", "delete", "orders-value", "--version", "1", "--addr", addr)
	ok("2\n", "schema", "list", "orders-value", "--addr", addr)
	ok("deleted subject orders-value softly: versions 2", "schema", "delete", "orders-value", "--addr", addr)
	ok("deleted subject orders-value for good: versions 1 2", "schema", "delete", "orders-value", "--permanent", "--addr", addr)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schema", "register", "s"}, "--file is required"},
		{[]string{"schema", "register", "s", "--file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"schema", "register", "s", "--file", v1, "--ref", "x"}, `--ref "x": want NAME=SUBJECT:VERSION`},
		{[]string{"schema", "register", "--file", v1}, "needs one subject name"},
		{[]string{"schema", "get", "s", "--version", "0"}, `--version "0": want a version from 1, or latest`},
		{[]string{"schema", "get", "s", "--id", "3"}, "takes a SUBJECT or --id, not both"},
		{[]string{"schema", "check", "has space", "--file", v1}, `subject "has space"`},
	} {
		fails(2, tc.want, append(tc.args, "--addr", addr)...)
	}
}
