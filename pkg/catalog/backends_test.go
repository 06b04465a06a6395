package catalog_test

import (
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/harness/portable"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// TestBackendsHandOutOnlyTheCatalog reads the source of every backend
// package (each directory below this one but catalogtest) and lists its
// exported functions that return a catalog: each must return
// *catalog.Catalog. The driver behind it must not be reachable otherwise:
// no exported type has a driver method or embeds or aliases an unexported
// type, and no exported function returns an unexported type. So the only
// way to a backend's storage is through Catalog's checks.
func TestBackendsHandOutOnlyTheCatalog(t *testing.T) {
	portable.CheckBackends(t, portable.Contract{
		Dir: ".", Skip: "catalogtest", Driver: reflect.TypeFor[catalog.Driver](), Portable: "catalog.Catalog",
		Constructors: map[string]string{
			"embedded.Open": "*catalog.Catalog, error",
			"dynamodb.New":  "*catalog.Catalog, error",
		},
	})
}
