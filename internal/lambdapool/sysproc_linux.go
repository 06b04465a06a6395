package lambdapool

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts an RIE in a process group of its own, so a terminal's
// Ctrl-C reaches only the pool, which then stops its instances in order;
// and has the kernel kill the RIE if the pool process dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killMarked kills (SIGKILL) every process whose environment holds the
// entry KEY=VALUE. A pid is read from /proc, then held through a pidfd
// (os.FindProcess) and checked again, so a recycled pid is never
// signalled.
func killMarked(entry string) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self || !hasEnvEntry(pid, entry) {
			continue
		}
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if hasEnvEntry(pid, entry) {
			_ = p.Kill()
		}
		_ = p.Release()
	}
}

// hasEnvEntry reports whether process pid's initial environment holds
// entry exactly; false when it cannot be read (gone, or not ours).
func hasEnvEntry(pid int, entry string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if string(kv) == entry {
			return true
		}
	}
	return false
}
