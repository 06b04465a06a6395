package main

import (
	"regexp"
	"strings"
	"testing"
)

// volatile are the parts of an output that differ from run to run: times,
// topic ids, the figures of a load run.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`"timestamp":"\d+"`), `"timestamp":"<ms>"`},
	{regexp.MustCompile(`"topicId":"[0-9a-f]+"`), `"topicId":"<id>"`},
	{regexp.MustCompile(`\(id [0-9a-f]{32}\)`), "(id <id>)"},
	{regexp.MustCompile(`(__trigger\.[a-zA-Z0-9._-]+)\.\d+`), "$1.<created>"},
	{regexp.MustCompile(`"details":\[.*\]`), `"details":[...]`},
	{regexp.MustCompile(` in [0-9.]+s: .*$`), " in <figures>"},
}

// jsonSpace is the whitespace protojson puts, at random per build, after
// a comma or colon between JSON tokens (its output is deliberately
// unstable, so nobody compares it byte for byte).
var (
	jsonAfterComma = regexp.MustCompile(`,\s+(["{\[])`)
	jsonAfterColon = regexp.MustCompile(`":\s+`)
)

// progressLine is `sluice produce`'s progress, printed every 2 s: how many
// appear depends on the machine's speed.
var progressLine = regexp.MustCompile(`^\s+\d+ of \d+ records acknowledged$`)

// normalize turns command output into the form the README is compared
// in: volatile parts replaced, progress lines dropped, JSON lines without
// protojson's random spaces, trailing spaces gone.
func normalize(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if progressLine.MatchString(l) {
			continue
		}
		for _, v := range volatile {
			l = v.re.ReplaceAllString(l, v.with)
		}
		if strings.HasPrefix(l, "{") {
			l = jsonAfterColon.ReplaceAllString(jsonAfterComma.ReplaceAllString(l, ",$1"), `":`)
		}
		b.WriteString(strings.TrimRight(l, " ") + "\n")
	}
	return b.String()
}

// The README comparison ignores what differs from run to run and from build
// to build: protojson's random spaces (seen in CI), times, ids.
func TestNormalizeReadmeOutput(t *testing.T) {
	for _, c := range [][2]string{
		{`{"results":[{"partition":1}, {"partition":1, "offset":"1"}], "topicId":"c3107599dd535364231aaa10a6dfec67"}`,
			`{"results":[{"partition":1},{"partition":1,"offset":"1"}],"topicId":"0f0e"}`},
		{`{"records":[{"offset":"1", "value":"d29ybGQ=", "timestamp":"1796472553464"}], "highWatermark":"2",  "nextOffset":"2"}`,
			`{"records":[{"offset":"1","value":"d29ybGQ=","timestamp":"1"}],"highWatermark":"2","nextOffset":"2"}`},
		{`{"status": "SERVING"}`, `{"status":"SERVING"}`},
		{`{"code":"out_of_range", "message":"offset 99 of orders/0 is out of range: valid offsets are 0..3 (log start..high watermark)", "details":[{"type":"x"}]}`,
			`{"code":"out_of_range","message":"offset 99 of orders/0 is out of range: valid offsets are 0..3 (log start..high watermark)","details":[...]}`},
		{`topic orders, created 2026-12-05T12:08:59Z`, `topic orders, created 2026-11-30T21:26:56Z`},
		{`topic:            payments (id 5e82c5ad97ccd452447d1859ebfbf987)`, `topic:            payments (id 0123456789abcdef0123456789abcdef)`},
		{`group:            __trigger.bill.1796483241824 (1 fetch copy runs it)`, `group:            __trigger.bill.1 (1 fetch copy runs it)`},
		{`20000 records of 1024 B in 0.39s: 50920 records/s, 52.1 MB/s; request latency p50 26ms`, `20000 records of 1024 B in 1.5s: 1 records/s`},
	} {
		if got, want := normalize([]string{c[0]}), normalize([]string{c[1]}); got != want {
			t.Errorf("normalize:\n %q\n %q\nshould match", got, want)
		}
	}
	// A slow machine's progress lines are not the README's business.
	slow := normalize([]string{"  17400 of 20000 records acknowledged", "20000 records of 1024 B in 2.5s: 8000 records/s"})
	if fast := normalize([]string{"20000 records of 1024 B in 0.4s: 50000 records/s"}); slow != fast {
		t.Errorf("normalize with a progress line:\n %q\n %q\nshould match", slow, fast)
	}
	// What matters still differs.
	if normalize([]string{`{"partition":1, "offset":"1"}`}) == normalize([]string{`{"partition":1,"offset":"2"}`}) {
		t.Error("different offsets normalize alike")
	}
	if normalize([]string{"partition 0 offset 2"}) == normalize([]string{"partition 0 offset 9"}) {
		t.Error("different CLI lines normalize alike")
	}
}
