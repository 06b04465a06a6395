package client

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/logevery"
)

// slowAdds logs appends acknowledged later than Config.SlowAdd after the
// writer took them: at most one line a second per client, counting the
// others. The line names the time each bookie took to answer, so a slow
// bookie stands out; an append whose quorum answered quickly but was
// acknowledged late waited for an earlier entry (acknowledgements are in
// entry order).
type slowAdds struct {
	lines logevery.Limiter
}

func (s *slowAdds) note(c *Client, ledger int64, wa *waitingAppend) {
	now := c.cfg.Now()
	took := now.Sub(wa.start)
	if took < c.cfg.SlowAdd {
		return
	}
	ok, others := s.lines.Allow(now)
	if !ok {
		return
	}
	c.log.Warn("slow ledger add", slog.Int64("ledger", ledger), slog.Int64("entry", wa.entry),
		slog.Duration("acknowledged_after", took), slog.String("bookies", formatAnswers(wa.acks)),
		slog.Int("other_slow_adds", others))
}

// formatAnswers is "b1 3.1ms, b2 87ms (failed)" in arrival order.
func formatAnswers(acks []bookieTime) string {
	if len(acks) == 0 {
		return "none answered"
	}
	var b strings.Builder
	for i, a := range acks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", a.bookie, a.after.Round(100*time.Microsecond))
		if a.failed {
			b.WriteString(" (failed)")
		}
	}
	return b.String()
}
