package partlog

import (
	"container/list"
	"sync"

	"github.com/sluicemq/sluice/pkg/segment"
)

// indexCache is an LRU of opened segments (their decoded footer and
// indexes: what finding an offset or a timestamp in an offloaded ledger
// needs without I/O), keyed by object key, bounded in bytes and in count.
// An object never changes once written (a rewrite gets a new key), so a
// cached index is never stale.
type indexCache struct {
	// mu guards size, order, items and the counters (max and maxN are
	// fixed). A leaf, taken with no other lock of the package held.
	mu    sync.Mutex
	max   int64
	maxN  int
	size  int64
	order *list.List // front = most recently used; values are *indexItem
	items map[string]*list.Element

	hits, misses uint64
}

type indexItem struct {
	key  string
	r    *segment.Reader
	size int64
}

func newIndexCache(maxBytes int64, maxN int) *indexCache {
	return &indexCache{max: maxBytes, maxN: maxN, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *indexCache) get(key string) (*segment.Reader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(el)
	return el.Value.(*indexItem).r, true
}

// put adds an opened segment of about size bytes; one larger than the
// whole cache is not kept.
func (c *indexCache) put(key string, r *segment.Reader, size int64) {
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&indexItem{key: key, r: r, size: size})
	c.size += size
	for c.size > c.max || len(c.items) > c.maxN {
		el := c.order.Back()
		it := el.Value.(*indexItem)
		c.order.Remove(el)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

func (c *indexCache) stats() (size int64, n int, hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, len(c.items), c.hits, c.misses
}
