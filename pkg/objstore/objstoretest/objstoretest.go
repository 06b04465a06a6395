// Package objstoretest is the conformance suite every objstore driver
// passes: the fetch service and the compactor rely on exactly these
// behaviours, whichever store is configured.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/objstore"
)

// Run runs the suite against b, which must be empty (or at least hold
// nothing under the "conformance/" prefix).
func Run(t *testing.T, b *blob.Bucket) {
	ctx := context.Background()
	body := make([]byte, 3<<20+17) // over a multipart part for s3
	for i := range body {
		body[i] = byte(i*7 + i>>11)
	}

	t.Run("WriteReadWholeAndRanges", func(t *testing.T) {
		key := "conformance/whole"
		if err := b.WriteAll(ctx, key, body, nil); err != nil {
			t.Fatalf("write: %v", err)
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read back: %d bytes, err %v; want %d identical bytes", len(got), err, len(body))
		}
		attr, err := b.Attributes(ctx, key)
		if err != nil || attr.Size != int64(len(body)) {
			t.Fatalf("attributes: %+v, %v; want size %d", attr, err, len(body))
		}
		for _, r := range []struct{ off, n int64 }{{0, 1}, {5, 100}, {1 << 20, 1 << 20}, {int64(len(body)) - 10, 10}, {int64(len(body)) - 10, -1}} {
			rd, err := b.NewRangeReader(ctx, key, r.off, r.n, nil)
			if err != nil {
				t.Fatalf("range %d+%d: %v", r.off, r.n, err)
			}
			got, err := io.ReadAll(rd)
			rd.Close()
			end := int64(len(body))
			if r.n >= 0 {
				end = r.off + r.n
			}
			if err != nil || !bytes.Equal(got, body[r.off:end]) {
				t.Fatalf("range %d+%d: %d bytes, err %v; want body[%d:%d]", r.off, r.n, len(got), err, r.off, end)
			}
		}
	})

	t.Run("MissingIsNotFound", func(t *testing.T) {
		_, err := b.ReadAll(ctx, "conformance/missing")
		if !objstore.IsNotFound(err) {
			t.Fatalf("read of a missing key: %v; want NotFound", err)
		}
		_, err = b.Attributes(ctx, "conformance/missing")
		if !objstore.IsNotFound(err) {
			t.Fatalf("attributes of a missing key: %v; want NotFound", err)
		}
		if err := b.Delete(ctx, "conformance/missing"); err != nil && !objstore.IsNotFound(err) {
			t.Fatalf("delete of a missing key: %v; want nil or NotFound", err)
		}
	})

	t.Run("AbortedWriteLeavesNothing", func(t *testing.T) {
		key := "conformance/aborted"
		wctx, cancel := context.WithCancel(ctx)
		w, err := b.NewWriter(wctx, key, nil)
		if err != nil {
			t.Fatalf("new writer: %v", err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatalf("write: %v", err)
		}
		cancel() // the writer's context ends before Close: the write is abandoned
		if err := w.Close(); err == nil {
			t.Fatalf("close after cancel succeeded; want an error")
		}
		if ok, err := b.Exists(ctx, key); err != nil || ok {
			t.Fatalf("exists after an aborted write = %v, %v; want false", ok, err)
		}
	})

	t.Run("ListByPrefixAndDelete", func(t *testing.T) {
		var want []string
		for i := range 5 {
			key := fmt.Sprintf("conformance/list/%03d", i)
			want = append(want, key)
			if err := b.WriteAll(ctx, key, []byte{byte(i)}, nil); err != nil {
				t.Fatalf("write %s: %v", key, err)
			}
		}
		if err := b.WriteAll(ctx, "conformance/listx", []byte("other"), nil); err != nil {
			t.Fatal(err)
		}
		list := func() []string {
			var keys []string
			it := b.List(&blob.ListOptions{Prefix: "conformance/list/"})
			for {
				o, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					return keys
				}
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				keys = append(keys, o.Key)
			}
		}
		if got := list(); !slices.Equal(got, want) {
			t.Fatalf("list = %v, want %v", got, want)
		}
		if err := b.Delete(ctx, want[2]); err != nil {
			t.Fatalf("delete: %v", err)
		}
		want = slices.Delete(want, 2, 3)
		if got := list(); !slices.Equal(got, want) {
			t.Fatalf("list after delete = %v, want %v", got, want)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		key := "conformance/overwrite"
		for _, v := range []string{"first", "second"} {
			if err := b.WriteAll(ctx, key, []byte(v), nil); err != nil {
				t.Fatal(err)
			}
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil || string(got) != "second" {
			t.Fatalf("after overwrite: %q, %v; want %q", got, err, "second")
		}
	})
}
