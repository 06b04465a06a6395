package loadgen

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat: clock ticks of
// USER_HZ, which Linux fixes at 100 on every architecture Go supports
// (sysconf(_SC_CLK_TCK) would say so, but needs cgo).
const userHZ = 100

// pageSize converts /proc/<pid>/stat's rss (pages) to bytes.
var pageSize = int64(os.Getpagesize())

// ProcStat is the part of /proc/<pid>/stat the benchmark uses.
type ProcStat struct {
	Comm       string // the executable's name, as the kernel shows it
	UTimeTicks int64  // user CPU time, clock ticks (field 14)
	STimeTicks int64  // system CPU time, clock ticks (field 15)
	StartTicks int64  // start time since boot, clock ticks (field 22): with the pid, names one process for good
	RSSPages   int64  // resident set size, pages (field 24)
}

// CPU returns the process's user plus system CPU time.
func (s ProcStat) CPU() time.Duration {
	return time.Duration(s.UTimeTicks+s.STimeTicks) * time.Second / userHZ
}

// ParseProcStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and parentheses, so
// the fields after it are found from the last ')'.
func ParseProcStat(b []byte) (ProcStat, error) {
	s := string(b)
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp {
		return ProcStat{}, errors.New("proc stat: no (comm) field")
	}
	f := strings.Fields(s[rp+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	const last = 24
	if len(f) < last-2 {
		return ProcStat{}, fmt.Errorf("proc stat: %d fields after comm, want at least %d", len(f), last-2)
	}
	num := func(field int) (int64, error) {
		v, err := strconv.ParseInt(f[field-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: field %d: %w", field, err)
		}
		return v, nil
	}
	var st ProcStat
	st.Comm = s[lp+1 : rp]
	var err error
	for _, p := range []struct {
		field int
		v     *int64
	}{{14, &st.UTimeTicks}, {15, &st.STimeTicks}, {22, &st.StartTicks}, {24, &st.RSSPages}} {
		if *p.v, err = num(p.field); err != nil {
			return ProcStat{}, err
		}
	}
	return st, nil
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("server pid %d: %w", pid, err)
	}
	return ParseProcStat(b)
}

// SelfCPU returns the CPU time (user + system) this process has used so
// far, all threads.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// ServerProcess names one server process whose CPU the benchmark charges to
// the system under test.
type ServerProcess struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// ParseServerPIDs parses a comma-separated list of pids, each optionally
// named: "1234,1240" or "kafka-1=1234,kafka-2=1240".
func ParseServerPIDs(s string) ([]ServerProcess, error) {
	var out []ServerProcess
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, num, named := strings.Cut(item, "=")
		if !named {
			num, name = name, ""
		}
		pid, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("server pid %q: want a positive number or name=number", item)
		}
		if name == "" {
			name = "pid " + strconv.Itoa(pid)
		}
		out = append(out, ServerProcess{Name: strings.TrimSpace(name), PID: pid})
	}
	return out, nil
}

// ProcessCPU is one server process's cost over the measured window.
type ProcessCPU struct {
	ServerProcess
	Comm       string  `json:"comm"`
	CPUSeconds float64 `json:"cpuSeconds"`
	RSSBytes   int64   `json:"rssBytes"` // at the end of the window
	// PeakRSSBytes is the process's peak resident set size since it
	// started (VmHWM of /proc/<pid>/status) at the end of the window: the
	// memory bound under overload, warm-up included.
	PeakRSSBytes int64 `json:"peakRssBytes,omitempty"`
}

// ReadPeakRSS returns VmHWM of /proc/<pid>/status in bytes.
func ReadPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return ParsePeakRSS(string(b))
}

// ParsePeakRSS parses the VmHWM line ("VmHWM:   123456 kB") of a
// /proc/<pid>/status.
func ParsePeakRSS(status string) (int64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: VmHWM line %q: want \"<n> kB\"", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc status: VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("proc status: no VmHWM line")
}

// cpuSnapshot is the CPU state of the servers and of this process at one
// instant.
type cpuSnapshot struct {
	servers []ProcStat
	self    time.Duration
}

func takeCPU(servers []ServerProcess) (cpuSnapshot, error) {
	snap := cpuSnapshot{servers: make([]ProcStat, len(servers))}
	var errs []error
	for i, p := range servers {
		st, err := ReadProcStat(p.PID)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
		snap.servers[i] = st
	}
	self, err := SelfCPU()
	if err != nil {
		errs = append(errs, err)
	}
	snap.self = self
	return snap, errors.Join(errs...)
}

// cpuDelta returns each server's CPU between two snapshots, and an error if
// a server exited or was replaced (another start time) in between: its CPU
// would be wrong, and the run suspect.
func cpuDelta(servers []ServerProcess, a, b cpuSnapshot) ([]ProcessCPU, error) {
	out := make([]ProcessCPU, len(servers))
	var errs []error
	for i, p := range servers {
		sa, sb := a.servers[i], b.servers[i]
		if sa.StartTicks != sb.StartTicks {
			errs = append(errs, fmt.Errorf("%s (pid %d) restarted or exited during the measured window", p.Name, p.PID))
		}
		out[i] = ProcessCPU{ServerProcess: p, Comm: sb.Comm,
			CPUSeconds: (sb.CPU() - sa.CPU()).Seconds(), RSSBytes: sb.RSSPages * pageSize}
		if peak, err := ReadPeakRSS(p.PID); err == nil {
			out[i].PeakRSSBytes = peak
		}
	}
	return out, errors.Join(errs...)
}
