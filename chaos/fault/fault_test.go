package fault

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	return serveTCP(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// serveTCP runs handle on every connection to a fresh loopback listener
// (closing it after) until the test ends, and returns the address.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and reads it back within d.
func roundTrip(addr string, d time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func TestProxyModes(t *testing.T) {
	p, err := NewProxy("link", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	// A connection open across a cut is closed by it.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.Set(Cut)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read on a cut connection: %v, want it closed", err)
	}
	if err := roundTrip(p.Addr(), time.Second); err == nil || isTimeout(err) {
		t.Fatalf("cut: %v, want the connection closed at once", err)
	}
	p.Set(Blackhole)
	if err := roundTrip(p.Addr(), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("blackhole: %v, want a timeout", err)
	}
	p.Set(Pass)
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A muted link delivers requests and drops the answers; leaving Mute
// closes the connections it tore.
func TestProxyMute(t *testing.T) {
	got := make(chan string, 16)
	addr := serveTCP(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- line
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	})
	p, err := NewProxy("link", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "before\n" {
		t.Fatalf("pass: %q %v", line, err)
	}
	<-got
	p.SetFrom("", Mute)
	if _, err := c.Write([]byte("muted\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "muted\n" {
			t.Fatalf("target got %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a muted link did not deliver the request")
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("muted: read %q %v, want the answer dropped (timeout)", line, err)
	}
	p.SetFrom("", Pass)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("read after unmute: %v, want the torn connection closed", err)
	}
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

func TestProxyCloseWhileBlackholed(t *testing.T) {
	p, err := NewProxy("link", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Set(Blackhole)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a blackholed connection")
	}
}

// Every injection is a fault op in the history, failed ones with their
// error, and the budget is enforced.
func TestInjectorRecordsAndBounds(t *testing.T) {
	var buf bytes.Buffer
	rec, err := history.NewRecorder(&buf, history.Config{Scenario: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy("a:b", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in := NewInjector(rec, 3)
	if err := in.Cut(p); err != nil {
		t.Fatal(err)
	}
	if err := in.Heal(p); err != nil {
		t.Fatal(err)
	}
	if err := in.Do("pause", "c1", func() error { return io.ErrClosedPipe }); err == nil {
		t.Fatal("a failed injection returned nil")
	}
	if err := in.Blackhole(p); err == nil {
		t.Fatal("a fourth injection passed a budget of 3")
	}
	if p.Mode() != Pass {
		t.Fatalf("mode %v after an injection over budget, want pass", p.Mode())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	n, by := in.Count()
	if n != 3 || by["cut"] != 1 || by["heal"] != 1 || by["pause"] != 1 {
		t.Fatalf("count %d %v", n, by)
	}
	r, err := history.NewReader(&buf, history.ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, op.FaultName+" "+op.Target+" "+op.Error)
	}
	want := []string{"cut a:b ", "heal a:b ", "pause c1 " + io.ErrClosedPipe.Error()}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history faults %q, want %q", got, want)
	}
}
