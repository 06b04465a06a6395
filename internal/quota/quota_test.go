package quota

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestUnlimited(t *testing.T) {
	l := newLimiter(t, Config{})
	for i := range 100 {
		if d := l.Record(fmt.Sprint("client-", i), 1<<30, t0); d != 0 {
			t.Fatalf("throttle %v with no quota", d)
		}
	}
	if n := l.Len(); n != 0 {
		t.Errorf("%d buckets kept for unlimited clients", n)
	}
}

// step is one Record at t0+at, and the throttle it must return.
type step struct {
	key  string
	n    int
	at   time.Duration
	want time.Duration
}

func TestThrottle(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"burst, then the debt over the rate", Config{Default: Quota{BytesPerSecond: 1000}}, []step{
			{"a", 600, 0, 0},
			{"a", 400, 0, 0},             // exactly the burst (one second's worth)
			{"a", 500, 0, 500 * ms},      // 500 bytes of debt at 1000/s
			{"a", 0, 200 * ms, 300 * ms}, // paying it off
			{"a", 100, 500 * ms, 100 * ms},
			{"a", 0, 600 * ms, 0},
			{"a", 1000, 1600 * ms, 0}, // refilled
			{"b", 1500, 1600 * ms, 500 * ms},
		}},
		{"explicit burst", Config{Default: Quota{BytesPerSecond: 100, Burst: 10}}, []step{
			{"a", 10, 0, 0},
			{"a", 10, 0, 100 * ms},
			{"a", 10, 1000 * ms, 0}, // refill stops at the burst
			{"a", 10, 1000 * ms, 100 * ms},
		}},
		{"overrides", Config{
			Default:   Quota{BytesPerSecond: 1000},
			Overrides: map[string]Quota{"big": {BytesPerSecond: 10000}, "free": {}, "small": {BytesPerSecond: 10, Burst: 1}},
		}, []step{
			{"big", 11000, 0, 100 * ms},
			{"free", 1 << 30, 0, 0},
			{"small", 11, 0, time.Second},
			{"other", 2000, 0, time.Second},
		}},
		{"override limits an unlimited default", Config{Overrides: map[string]Quota{"noisy": {BytesPerSecond: 1}}}, []step{
			{"quiet", 1 << 30, 0, 0},
			{"noisy", 3, 0, 2 * time.Second},
		}},
		{"debt capped at MaxThrottle", Config{Default: Quota{BytesPerSecond: 1000}, MaxThrottle: 2 * time.Second}, []step{
			{"a", 1 << 40, 0, 2 * time.Second},
			{"a", 1 << 40, time.Second, 2 * time.Second},
			{"a", 0, 3 * time.Second, 0}, // the capped debt is paid
			{"a", 1000, 4 * time.Second, 0},
		}},
		{"cost rounds up to the nanosecond", Config{Default: Quota{BytesPerSecond: 3, Burst: 1}}, []step{
			{"a", 1, 0, 0},
			{"a", 1, 0, 333333334},
		}},
		{"clock going back is tolerated", Config{Default: Quota{BytesPerSecond: 1000}, MaxThrottle: time.Second}, []step{
			{"a", 1500, 10 * time.Second, 500 * ms},
			{"a", 0, 9 * time.Second, time.Second}, // capped
			{"a", 0, 12 * time.Second, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, tc.cfg)
			for i, st := range tc.steps {
				if got := l.Record(st.key, st.n, t0.Add(st.at)); got != st.want {
					t.Fatalf("step %d: Record(%q, %d, +%v) = %v, want %v", i, st.key, st.n, st.at, got, st.want)
				}
			}
		})
	}
}

// A client that waits out every throttle gets its quota: the burst, then
// the rate — Kafka's contract for throttle time.
func TestObedientClientGetsItsRate(t *testing.T) {
	const rate, burst, msg = 1 << 20, 256 << 10, 10000
	l := newLimiter(t, Config{Default: Quota{BytesPerSecond: rate, Burst: burst}})
	now, end := t0, t0.Add(time.Minute)
	sent := 0
	for now.Before(end) {
		d := l.Record("c", msg, now)
		sent += msg
		now = now.Add(d)
	}
	want := burst + rate*60
	if sent < want || sent > want+2*msg {
		t.Errorf("sent %d bytes in a minute, want %d (+ a message or two)", sent, want)
	}
}

func TestEviction(t *testing.T) {
	l := newLimiter(t, Config{Default: Quota{BytesPerSecond: 1000}, MaxKeys: 2})
	l.Record("a", 3000, t0) // 2 s of debt
	l.Record("b", 3000, t0)
	if d := l.Record("c", 3000, t0); d != 2*time.Second {
		t.Fatalf("c: %v", d)
	}
	if n := l.Len(); n != 2 {
		t.Fatalf("%d buckets kept, want the bound 2", n)
	}
	// a was unused longest: evicted, its debt forgiven.
	if d := l.Record("a", 1000, t0); d != 0 {
		t.Errorf("a after eviction: %v, want a fresh bucket", d)
	}
	// b went to make room for a, and so on; c is still in debt.
	if d := l.Record("c", 0, t0.Add(time.Second)); d != time.Second {
		t.Errorf("c: %v", d)
	}
	// Refilled buckets are dropped: they are the same as new ones.
	if d := l.Record("c", 0, t0.Add(time.Hour)); d != 0 {
		t.Errorf("c after an hour: %v", d)
	}
	if n := l.Len(); n != 1 {
		t.Errorf("%d buckets kept after an hour, want just c's", n)
	}
}

func TestConfigValidate(t *testing.T) {
	l := newLimiter(t, Config{})
	if l.maxKeys != DefaultMaxKeys || l.maxThrottle != DefaultMaxThrottle {
		t.Errorf("defaults: %d %v", l.maxKeys, l.maxThrottle)
	}
	_, err := New(Config{
		Default: Quota{BytesPerSecond: -1},
		Overrides: map[string]Quota{
			"x": {Burst: 5},
			"y": {BytesPerSecond: 1, Burst: 1 << 30},
			"z": {BytesPerSecond: MaxBytesPerSecond + 1},
		},
		MaxKeys:     -1,
		MaxThrottle: 2 * MaxMaxThrottle,
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, field := range []string{"Default.BytesPerSecond", `Overrides["x"].Burst`, `Overrides["y"].Burst`, `Overrides["z"].BytesPerSecond`, "MaxKeys", "MaxThrottle"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not report %s: %v", field, err)
		}
	}
}

func TestRecordNegativePanics(t *testing.T) {
	l := newLimiter(t, Config{})
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	l.Record("a", -1, t0)
}

// TestAgainstModel compares Record with a token bucket in exact rational
// arithmetic: tokens refill at the rate up to the burst, every request takes
// its bytes, debt stops at MaxThrottle worth, throttle = -tokens/rate. The
// Limiter rounds each request's cost up to the nanosecond, so it may be
// ahead of the model by at most a nanosecond per request.
func TestAgainstModel(t *testing.T) {
	type mBucket struct {
		tokens *big.Rat
		last   time.Time
	}
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		quotas := []Quota{{}, {BytesPerSecond: 1 + r.Int64N(1e6)}, {BytesPerSecond: 1 + r.Int64N(1e4), Burst: 1 + r.Int64N(1e4)}, {BytesPerSecond: 1 + r.Int64N(1e9), Burst: 1 + r.Int64N(1e8)}}
		cfg := Config{Default: quotas[r.IntN(len(quotas))], Overrides: map[string]Quota{}, MaxThrottle: time.Duration(1+r.IntN(5000)) * time.Millisecond}
		keys := []string{"k0", "k1", "k2", "k3", "k4"}
		for _, k := range keys[:3] {
			cfg.Overrides[k] = quotas[r.IntN(len(quotas))]
		}
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		quotaOf := func(k string) Quota {
			if q, ok := cfg.Overrides[k]; ok {
				return q.withDefaults()
			}
			return cfg.Default.withDefaults()
		}
		model := map[string]*mBucket{}
		now := t0
		for i := range 300 {
			now = now.Add(time.Duration(r.Int64N(int64(2 * time.Second))))
			if r.IntN(4) == 0 {
				now = now.Add(time.Duration(r.Int64N(1000)))
			}
			k := keys[r.IntN(len(keys))]
			n := r.IntN(1 << uint(r.IntN(24)))
			got := l.Record(k, n, now)

			q := quotaOf(k)
			if q.BytesPerSecond == 0 {
				if got != 0 {
					t.Errorf("seed %d step %d: unlimited %s throttled %v", seed, i, k, got)
					return false
				}
				continue
			}
			rate := big.NewRat(q.BytesPerSecond, int64(time.Second)) // bytes per ns
			burst := new(big.Rat).SetInt64(q.Burst)
			b := model[k]
			if b == nil {
				b = &mBucket{tokens: new(big.Rat).Set(burst), last: now}
				model[k] = b
			}
			refill := new(big.Rat).Mul(rate, new(big.Rat).SetInt64(int64(now.Sub(b.last))))
			b.tokens.Add(b.tokens, refill)
			if b.tokens.Cmp(burst) > 0 {
				b.tokens.Set(burst)
			}
			b.tokens.Sub(b.tokens, new(big.Rat).SetInt64(int64(n)))
			floor := new(big.Rat).Mul(rate, new(big.Rat).SetInt64(-int64(cfg.MaxThrottle)))
			if b.tokens.Cmp(floor) < 0 {
				b.tokens.Set(floor)
			}
			b.last = now
			want := new(big.Rat)
			if b.tokens.Sign() < 0 {
				want.Quo(new(big.Rat).Neg(b.tokens), rate)
			}
			diff := new(big.Rat).Sub(new(big.Rat).SetInt64(int64(got)), want)
			if diff.Cmp(big.NewRat(-1, 1)) <= 0 || diff.Cmp(big.NewRat(int64(i+1), 1)) > 0 {
				t.Errorf("seed %d step %d: Record(%s, %d) = %v, model %s ns", seed, i, k, n, got, want.FloatString(1))
				return false
			}
			if got > cfg.MaxThrottle {
				t.Errorf("seed %d step %d: throttle %v over MaxThrottle %v", seed, i, got, cfg.MaxThrottle)
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 100}); err != nil {
		t.Fatal(err)
	}
}

// With many more clients than MaxKeys, the bound holds and every answer is
// within [0, MaxThrottle].
func TestBoundedUnderChurn(t *testing.T) {
	l := newLimiter(t, Config{Default: Quota{BytesPerSecond: 1000}, MaxKeys: 8, MaxThrottle: time.Second})
	r := rand.New(rand.NewPCG(1, 2))
	now := t0
	for range 10000 {
		now = now.Add(time.Duration(r.IntN(1000)) * time.Microsecond)
		d := l.Record(fmt.Sprint("c", r.IntN(100)), r.IntN(5000), now)
		if d < 0 || d > time.Second {
			t.Fatalf("throttle %v", d)
		}
		if n := l.Len(); n > 8 {
			t.Fatalf("%d buckets", n)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	l := newLimiter(t, Config{Default: Quota{BytesPerSecond: 1 << 20}})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 1000 {
				l.Record(fmt.Sprint("c", (g*1000+i)%7), 100, t0.Add(time.Duration(i)*time.Millisecond))
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func TestCost(t *testing.T) {
	for _, tc := range []struct {
		n, rate int64
		want    time.Duration
	}{
		{0, 1, 0},
		{1, 1, time.Second},
		{1, 3, 333333334},
		{3, 3, time.Second},
		{1 << 40, 1, 1<<63 - 1}, // saturates
		{1 << 40, 1 << 40, time.Second},
	} {
		if got := cost(tc.n, tc.rate); got != tc.want {
			t.Errorf("cost(%d, %d) = %v, want %v", tc.n, tc.rate, got, tc.want)
		}
	}
}
