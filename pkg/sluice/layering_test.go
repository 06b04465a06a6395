package sluice

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The SDK imports only the standard library, Connect and protobuf runtime
// code, the OpenTelemetry API, generated code and pkg/record (STYLE.md: layering enforced by a
// test): never services/ or internal/, so users get a small dependency
// tree and the server's internals can change freely. Tests may import more
// (internal/cluster).
func TestSDKImportsOnlyAllowedPackages(t *testing.T) {
	allowed := []string{
		"connectrpc.com/connect",
		"google.golang.org/protobuf/",
		"google.golang.org/genproto/googleapis/rpc/errdetails",
		"github.com/sluicemq/sluice/pkg/gen/",
		"github.com/sluicemq/sluice/pkg/record",
		// Tracing: the OpenTelemetry API and otelconnect (tracing.go),
		// never the OpenTelemetry SDK or an exporter, which are the
		// application's choice.
		"connectrpc.com/otelconnect",
		"go.opentelemetry.io/otel/attribute",
		"go.opentelemetry.io/otel/codes",
		"go.opentelemetry.io/otel/propagation",
		"go.opentelemetry.io/otel/trace",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
	imports:
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(strings.Split(path, "/")[0], ".") {
				continue // standard library
			}
			for _, a := range allowed {
				if path == strings.TrimSuffix(a, "/") || strings.HasPrefix(path, a) {
					continue imports
				}
			}
			t.Errorf("%s imports %s, which the SDK may not depend on", name, path)
		}
	}
}
