package objstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/objstore/objstoretest"
)

func TestConformanceMem(t *testing.T) {
	b, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objstoretest.Run(t, b)
}

func TestConformanceFile(t *testing.T) {
	u, err := objstore.FileURL(t.TempDir() + "/objects")
	if err != nil {
		t.Fatal(err)
	}
	b, err := objstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objstoretest.Run(t, b)
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"gs://bucket", "file://relative/dir", "::"} {
		if _, err := objstore.Open(context.Background(), u); err == nil || !strings.Contains(err.Error(), "objstore") {
			t.Errorf("Open(%q) = %v; want an objstore error", u, err)
		}
	}
}
