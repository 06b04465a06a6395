package embedded_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/catalogtest"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

func TestConformance(t *testing.T) {
	catalogtest.Run(t, catalogtest.Harness{
		New: func(t *testing.T, clock catalog.Clock) catalogtest.Backend {
			return open(t, vfs.NewMem(), clock)
		},
	})
}

// TestConformanceOnDisk runs the suite once on the real filesystem, so the
// synced-write path is what the suite exercises, not only the in-memory FS.
func TestConformanceOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the in-memory run covers the logic")
	}
	catalogtest.Run(t, catalogtest.Harness{
		New: func(t *testing.T, clock catalog.Clock) catalogtest.Backend {
			c, err := embedded.Open(t.TempDir(), embedded.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
	})
}

func open(t *testing.T, fs vfs.FS, clock catalog.Clock) *catalog.Catalog {
	t.Helper()
	c, err := embedded.Open("catalog", embedded.Options{FS: fs, Clock: clock})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
