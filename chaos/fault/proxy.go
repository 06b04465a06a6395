package fault

import (
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Mode is a proxy's state.
type Mode int

const (
	// Pass forwards bytes both ways.
	Pass Mode = iota
	// Cut closes every proxied connection and closes new ones at once
	// (peers see connection refused/reset quickly).
	Cut
	// Blackhole accepts and keeps connections but forwards nothing: peers
	// see timeouts, the hardest partition to detect.
	Blackhole
	// Mute forwards requests but drops every answer: the target does the
	// work and its peers never hear of it (lost replies). The dropped bytes
	// leave the connections' streams torn, so leaving Mute closes them.
	Mute
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
	case Mute:
		return "mute"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// MaxProxyConns bounds the connections one proxy holds open at once; more
// are refused (closed at accept). Far above what a test cluster opens.
const MaxProxyConns = 512

// Proxy forwards TCP connections from its own loopback listener to a
// target address, and can cut or blackhole them. Its accept goroutine and
// two copy goroutines per connection are owned by the Proxy and stopped by
// Close, which waits for them.
type Proxy struct {
	name   string
	target string
	ln     net.Listener

	// identify names the process behind an accepted connection (nil:
	// every connection is from "").
	identify func(net.Conn) string

	mu      sync.Mutex
	mode    Mode
	sources map[string]Mode          // per-source modes, overriding mode
	conns   map[net.Conn]string      // both sides of every proxied connection → source
	gate    chan struct{}            // closed when the mode leaves Blackhole
	gates   map[string]chan struct{} // per blackholed source, closed when it leaves Blackhole
	done    bool

	wg sync.WaitGroup
}

// NewProxy listens on a fresh 127.0.0.1 port and forwards to target
// (which need not be listening yet: each connection dials it anew).
func NewProxy(name, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy %s: listen: %w", name, err)
	}
	p := &Proxy{name: name, target: target, ln: ln, conns: map[net.Conn]string{}, gate: make(chan struct{}),
		sources: map[string]Mode{}, gates: map[string]chan struct{}{}}
	close(p.gate)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept()
	}()
	return p, nil
}

// Name is the link's name, for the history.
func (p *Proxy) Name() string { return p.name }

// Addr is the proxy's listening address: what peers should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Identify sets how the proxy names the process behind each connection it
// accepts (see PeerPID), for per-source modes (SetFrom). Call it before
// peers connect.
func (p *Proxy) Identify(f func(net.Conn) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.identify = f
}

// Set changes the mode. Cut and Blackhole both drop the connections that
// exist (so no request already in flight completes through the link);
// Blackhole then holds new ones silent, Cut closes them. Mute keeps them
// and drops what the target answers; leaving Mute drops them. Per-source
// modes (SetFrom) still override it.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || m == p.mode {
		return
	}
	old := p.mode
	p.mode = m
	if dropsConns(old, m) {
		for c, src := range p.conns {
			if _, own := p.sources[src]; !own {
				c.Close()
				delete(p.conns, c)
			}
		}
	}
	switch {
	case m == Blackhole:
		p.gate = make(chan struct{})
	case old == Blackhole:
		close(p.gate)
	}
}

// SetFrom sets the mode of the link between one source process (as named
// by Identify) and the target only: a cut between two chosen processes
// while every other peer still gets through. Pass clears it (the
// connections then follow Set's mode).
func (p *Proxy) SetFrom(src string, m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	old, had := p.sources[src]
	if !had {
		old = p.mode
	}
	if m == Pass {
		delete(p.sources, src)
	} else {
		p.sources[src] = m
	}
	if dropsConns(old, m) {
		for c, s := range p.conns {
			if s == src {
				c.Close()
				delete(p.conns, c)
			}
		}
	}
	if g, ok := p.gates[src]; ok && m != Blackhole {
		close(g)
		delete(p.gates, src)
	}
	if m == Blackhole && p.gates[src] == nil {
		p.gates[src] = make(chan struct{})
	}
}

// dropsConns reports whether going from mode old to m closes the
// connections that exist: a cut or blackhole leaves none through, and a
// muted connection has lost bytes of its answers.
func dropsConns(old, m Mode) bool {
	return m != old && (m == Cut || m == Blackhole || old == Mute)
}

// muted reports whether src's answers are dropped now.
func (p *Proxy) muted(src string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, _ := p.modeFor(src)
	return m == Mute
}

// Sources lists the sources with a mode of their own (SetFrom), sorted.
func (p *Proxy) Sources() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.sources))
	for src := range p.sources {
		out = append(out, src)
	}
	slices.Sort(out)
	return out
}

// modeFor is the mode of src's connections (p.mu held) and the gate a
// blackholed one waits at.
func (p *Proxy) modeFor(src string) (Mode, chan struct{}) {
	if m, ok := p.sources[src]; ok {
		if m == Blackhole {
			return m, p.gates[src]
		}
		return m, nil
	}
	return p.mode, p.gate
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return nil
	}
	p.done = true
	err := p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	if p.mode == Blackhole {
		close(p.gate)
	}
	for src, g := range p.gates {
		close(g)
		delete(p.gates, src)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		identify := p.identify
		p.mu.Unlock()
		src := ""
		if identify != nil {
			src = identify(c) // outside the lock: it reads /proc
		}
		p.mu.Lock()
		mode, gate := p.modeFor(src)
		switch {
		case p.done || mode == Cut || len(p.conns) >= 2*MaxProxyConns:
			p.mu.Unlock()
			c.Close()
			continue
		}
		if mode != Blackhole {
			gate = nil
		}
		p.conns[c] = src
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			p.serve(c, src, gate)
		}()
	}
}

// serve proxies one connection of src. A blackholed connection (gate not
// nil) waits at the gate (reading nothing) until the mode changes or it is
// closed.
func (p *Proxy) serve(c net.Conn, src string, gate <-chan struct{}) {
	defer p.drop(c)
	if gate != nil {
		// Blackholed: wait until healed; Set or Close closes c, which
		// ends the wait below too.
		waitClosedOrGate(c, gate)
		return // a blackholed connection is never forwarded, even once healed
	}
	t, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if m, _ := p.modeFor(src); p.done || (m != Pass && m != Mute) {
		p.mu.Unlock()
		t.Close()
		return
	}
	if _, ok := p.conns[c]; !ok { // cut while dialing
		p.mu.Unlock()
		t.Close()
		return
	}
	p.conns[t] = src
	p.mu.Unlock()
	defer p.drop(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyClose(t, c)
	}()
	p.copyAnswers(c, t, src)
	wg.Wait()
}

// copyAnswers copies the target's answers t to the peer c, dropping what
// arrives while src is muted, and closes both when either side ends.
func (p *Proxy) copyAnswers(c, t net.Conn, src string) {
	defer c.Close()
	defer t.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.Read(buf)
		if n > 0 && !p.muted(src) {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // a reset or a cut ends the copy; either way both sides close
		}
	}
}

// waitClosedOrGate blocks until c is closed (a read fails) or gate closes.
func waitClosedOrGate(c net.Conn, gate <-chan struct{}) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	select {
	case <-closed:
	case <-gate:
		c.Close()
		<-closed
	}
}

// copyClose copies src to dst and closes both when either side ends.
func copyClose(dst, src net.Conn) {
	_, _ = io.Copy(dst, src) // a reset or a cut ends the copy; either way both sides close
	dst.Close()
	src.Close()
}

func (p *Proxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
