package partlog

import (
	"container/list"
	"sync"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// entryKey names one ledger entry, or one index interval of an offloaded
// ledger's segment object (entry is then the interval's position in the
// object, and object the object's key: a ledger rewritten to a new object
// never meets the old one's intervals).
type entryKey struct {
	ledger catalog.LedgerID
	entry  int64
	object string
}

// entryCache is an LRU of entry payloads bounded in bytes, shared by every
// partition of a fetch copy. An entry readable once (at or below the LAC,
// or in a sealed ledger) never changes, so a cached payload is never stale;
// payloads are shared, read-only, by every reader.
type entryCache struct {
	// mu guards size, order, items and the counters (max is fixed). A
	// leaf, taken with no other lock of the package held.
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front = most recently used; values are *cacheItem
	items map[entryKey]*list.Element

	hits, misses uint64
}

type cacheItem struct {
	key     entryKey
	payload []byte
}

func newEntryCache(maxBytes int64) *entryCache {
	return &entryCache{max: maxBytes, order: list.New(), items: make(map[entryKey]*list.Element)}
}

func (c *entryCache) get(k entryKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(el)
	return el.Value.(*cacheItem).payload, true
}

// has reports whether k is cached, without counting a hit or a miss.
func (c *entryCache) has(k entryKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// put adds an entry; one larger than the whole cache is not kept.
func (c *entryCache) put(k entryKey, payload []byte) {
	n := int64(len(payload))
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(&cacheItem{key: k, payload: payload})
	c.size += n
	for c.size > c.max {
		el := c.order.Back()
		it := el.Value.(*cacheItem)
		c.order.Remove(el)
		delete(c.items, it.key)
		c.size -= int64(len(it.payload))
	}
}

func (c *entryCache) stats() (size int64, entries int, hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, len(c.items), c.hits, c.misses
}
