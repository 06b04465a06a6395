package partlog

import "testing"

// The index cache keeps the most recently used indexes within its byte and
// count bounds, and never one larger than itself.
func TestIndexCacheBounds(t *testing.T) {
	c := newIndexCache(1000, 3)
	for i, k := range []string{"a", "b", "c", "d"} {
		c.put(k, nil, 100+int64(i))
	}
	if _, ok := c.get("a"); ok {
		t.Fatal("the least recently used index outlived the count bound")
	}
	if size, n, _, _ := c.stats(); n != 3 || size != 101+102+103 {
		t.Fatalf("%d indexes of %d bytes, want 3 of %d", n, size, 101+102+103)
	}
	c.get("b") // b is now the most recent: c goes first
	c.put("e", nil, 700)
	if _, ok := c.get("c"); ok {
		t.Fatal("c should have been evicted by bytes")
	}
	for _, k := range []string{"b", "e"} {
		if _, ok := c.get(k); !ok {
			t.Fatalf("%s was evicted", k)
		}
	}
	if size, _, _, _ := c.stats(); size > 1000 {
		t.Fatalf("%d bytes cached, bound 1000", size)
	}
	c.put("huge", nil, 1001)
	if _, ok := c.get("huge"); ok {
		t.Fatal("an index larger than the cache was kept")
	}
}
