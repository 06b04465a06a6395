package fault

import (
	"fmt"
	"io"
	"net"
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
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
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

	mu    sync.Mutex
	mode  Mode
	conns map[net.Conn]struct{} // both sides of every proxied connection
	gate  chan struct{}         // closed when the mode leaves Blackhole
	done  bool

	wg sync.WaitGroup
}

// NewProxy listens on a fresh 127.0.0.1 port and forwards to target
// (which need not be listening yet: each connection dials it anew).
func NewProxy(name, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy %s: listen: %w", name, err)
	}
	p := &Proxy{name: name, target: target, ln: ln, conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
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

// Set changes the mode. Cut and Blackhole both drop the connections that
// exist (so no request already in flight completes through the link);
// Blackhole then holds new ones silent, Cut closes them.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || m == p.mode {
		return
	}
	old := p.mode
	p.mode = m
	if m != Pass {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
	switch {
	case m == Blackhole:
		p.gate = make(chan struct{})
	case old == Blackhole:
		close(p.gate)
	}
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
		switch {
		case p.done || p.mode == Cut || len(p.conns) >= 2*MaxProxyConns:
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		gate := p.gate
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			p.serve(c, gate)
		}()
	}
}

// serve proxies one connection. A blackholed connection waits at the gate
// (reading nothing) until the mode changes or it is closed.
func (p *Proxy) serve(c net.Conn, gate <-chan struct{}) {
	defer p.drop(c)
	select {
	case <-gate:
	default:
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
	if p.done || p.mode != Pass {
		p.mu.Unlock()
		t.Close()
		return
	}
	p.conns[t] = struct{}{}
	p.mu.Unlock()
	defer p.drop(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyClose(t, c)
	}()
	copyClose(c, t)
	wg.Wait()
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
