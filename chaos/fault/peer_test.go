package fault

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestPeerPIDFindsTheProcessOfAConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	self := os.Getpid()
	if pid, err := PeerPID(s, []int{self}); err != nil || pid != self {
		t.Fatalf("PeerPID = %d, %v; want this process (%d)", pid, err, self)
	}
	if pid, err := PeerPID(s, []int{1 << 22}); err != nil || pid != 0 {
		t.Fatalf("PeerPID among other processes = %d, %v; want 0", pid, err)
	}
}

// A per-source cut closes one process's link to the target while another
// process still gets through the same proxy.
func TestProxyCutsOneSource(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash (/dev/tcp) for a second process")
	}
	p, err := NewProxy("link", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	self := os.Getpid()
	p.Identify(func(c net.Conn) string {
		if pid, _ := PeerPID(c, []int{self}); pid == self {
			return "test"
		}
		return "other"
	})
	host, port, _ := net.SplitHostPort(p.Addr())
	other := func() (string, error) { // a round trip from another process
		out, err := exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port+"; echo hello >&3; read -t 3 line <&3; echo \"$line\"").CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	c, err := net.Dial("tcp", p.Addr()) // open across the cut
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatal(err)
	}

	p.SetFrom("test", Cut)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read on a cut connection: %v, want it closed", err)
	}
	if err := roundTrip(p.Addr(), time.Second); err == nil || isTimeout(err) {
		t.Fatalf("this process through a cut link: %v, want the connection closed", err)
	}
	if out, err := other(); err != nil || out != "hello" {
		t.Fatalf("another process through the same proxy: %q, %v; want an echo", out, err)
	}
	p.SetFrom("other", Blackhole)
	if out, _ := other(); out == "hello" {
		t.Fatalf("a blackholed source got an echo")
	}
	p.SetFrom("test", Pass)
	if err := roundTrip(p.Addr(), 2*time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
	p.SetFrom("other", Pass)
	if out, err := other(); err != nil || out != "hello" {
		t.Fatalf("the other source healed: %q, %v", out, err)
	}
}
