package partlog

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/segment"
)

// Validate reports every field out of range, the offloaded-read bounds
// included; zero fields take the defaults.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero config: %v", err)
	}
	c := Config{CacheBytes: -1, Segments: SegmentConfig{IndexCacheBytes: -1, MaxIndexes: 2_000_000, ReadBytes: 128 << 20, Timeout: time.Hour,
		Reader: segment.ReaderOptions{TailReadBytes: 1}}}
	err := c.Validate()
	if err == nil {
		t.Fatal("an invalid config passed")
	}
	for _, f := range []string{"CacheBytes", "Segments.IndexCacheBytes", "Segments.MaxIndexes", "Segments.ReadBytes", "Segments.Reader", "TailReadBytes", "Segments.Timeout"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("the error does not name %s: %v", f, err)
		}
	}
	d := Config{}.withDefaults().Segments
	if d.IndexCacheBytes != DefaultIndexCacheBytes || d.MaxIndexes != DefaultMaxIndexes || d.ReadBytes != DefaultObjectReadBytes {
		t.Fatalf("defaults: %+v", d)
	}
}
