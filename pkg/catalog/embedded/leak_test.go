package embedded_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Close must stop every goroutine Pebble started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
