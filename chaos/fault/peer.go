package fault

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// PeerPID finds which of pids holds the other end of c, a loopback TCP
// connection accepted by this process: it looks the peer's socket up in
// /proc/net/tcp (local address = c's remote address, remote address = c's
// local address) and then the socket's inode among the descriptors of each
// candidate process. 0 when none of them holds it (Linux only; the chaos
// harness runs on loopback and owns the processes it asks about).
func PeerPID(c net.Conn, pids []int) (int, error) {
	local, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return 0, err
	}
	remote, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return 0, err
	}
	inode, err := socketInode(local, remote)
	if err != nil || inode == "" {
		return 0, err
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
				return pid, nil
			}
		}
	}
	return 0, nil
}

// socketInode returns the inode of the TCP socket local→remote from
// /proc/net/tcp or /proc/net/tcp6 ("" if there is none).
func socketInode(local, remote netip.AddrPort) (string, error) {
	want := procAddr(local) + " " + procAddr(remote)
	file := "/proc/net/tcp"
	if local.Addr().Is6() && !local.Addr().Is4In6() {
		file = "/proc/net/tcp6"
	}
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[1]+" "+fields[2] != want {
			continue
		}
		return fields[9], nil
	}
	return "", sc.Err()
}

// procAddr formats an address as /proc/net/tcp does: the IPv4 address as
// a little-endian 32-bit hex number (IPv6: four of them), a colon, the port
// as 4 hex digits.
func procAddr(ap netip.AddrPort) string {
	a := ap.Addr().Unmap()
	var b strings.Builder
	if a.Is4() {
		v := a.As4()
		fmt.Fprintf(&b, "%02X%02X%02X%02X", v[3], v[2], v[1], v[0])
	} else {
		v := a.As16()
		for i := 0; i < 16; i += 4 {
			fmt.Fprintf(&b, "%02X%02X%02X%02X", v[i+3], v[i+2], v[i+1], v[i])
		}
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}
