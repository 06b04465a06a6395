package bookkeeping_test

import (
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/harness/portable"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// TestBackendsHandOutOnlyTheStore reads the source of every backend package
// (each directory below this one but bookkeepingtest) and lists its
// exported functions that return a store: each must return
// *bookkeeping.Store. The driver behind it must not be reachable otherwise:
// no exported type has a driver method or embeds or aliases an unexported
// type, and no exported function returns an unexported type. So the only
// way to a backend's storage is through Store's checks.
func TestBackendsHandOutOnlyTheStore(t *testing.T) {
	portable.CheckBackends(t, portable.Contract{
		Dir: ".", Skip: "bookkeepingtest", Driver: reflect.TypeFor[bookkeeping.Driver](), Portable: "bookkeeping.Store",
		Constructors: map[string]string{
			"embedded.Open":  "*bookkeeping.Store, error",
			"cassandra.Open": "*bookkeeping.Store, error",
		},
	})
}
