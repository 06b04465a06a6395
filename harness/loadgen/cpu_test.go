package loadgen

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A real line from /proc/<pid>/stat of a JVM, with a command name holding a
// space and a parenthesis, as a process may name itself.
const statLine = "4242 (java (x) y) S 1 4242 4242 0 -1 1077936384 5126 0 1 0 1234 567 0 0 20 0 57 0 98765 4026531840 25000 18446744073709551615 1 1 0 0 0 0 0 4096 16796879 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

func TestParseProcStat(t *testing.T) {
	st, err := ParseProcStat([]byte(statLine))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStat{Comm: "java (x) y", UTimeTicks: 1234, STimeTicks: 567, StartTicks: 98765, RSSPages: 25000}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	if st.CPU() != 18010*time.Millisecond {
		t.Fatalf("CPU %v, want 18.01s (1801 ticks of 10 ms)", st.CPU())
	}
}

func TestParseProcStatRejectsGarbage(t *testing.T) {
	for _, s := range []string{"", "4242 java S 1", "4242 (java) S 1 2 3", strings.Replace(statLine, " 1234 ", " x ", 1)} {
		if _, err := ParseProcStat([]byte(s)); err == nil {
			t.Errorf("no error for %q", s)
		}
	}
}

func TestReadProcStatOfThisProcess(t *testing.T) {
	st, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.StartTicks <= 0 || st.RSSPages <= 0 {
		t.Fatalf("implausible stat of this process: %+v", st)
	}
	self, err := SelfCPU()
	if err != nil || self <= 0 {
		t.Fatalf("SelfCPU = %v, %v", self, err)
	}
	if _, err := ReadProcStat(-1); err == nil {
		t.Fatal("no error for pid -1")
	}
}

func TestParseServerPIDs(t *testing.T) {
	got, err := ParseServerPIDs(" 10, kafka-2=20 ,,")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (ServerProcess{"pid 10", 10}) || got[1] != (ServerProcess{"kafka-2", 20}) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"x", "a=b", "0", "-3"} {
		if _, err := ParseServerPIDs(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestCPUDeltaDetectsARestartedServer(t *testing.T) {
	servers := []ServerProcess{{"a", 1}, {"b", 2}}
	a := cpuSnapshot{servers: []ProcStat{{UTimeTicks: 100, StartTicks: 7}, {UTimeTicks: 100, StartTicks: 8}}}
	b := cpuSnapshot{servers: []ProcStat{{UTimeTicks: 150, STimeTicks: 50, StartTicks: 7, RSSPages: 2}, {UTimeTicks: 5, StartTicks: 9}}}
	procs, err := cpuDelta(servers, a, b)
	if err == nil || !strings.Contains(err.Error(), "b (pid 2) restarted") {
		t.Fatalf("error %v, want b restarted", err)
	}
	if procs[0].CPUSeconds != 1 || procs[0].RSSBytes != 2*pageSize {
		t.Fatalf("a: %+v", procs[0])
	}
}

func TestParsePeakRSS(t *testing.T) {
	got, err := ParsePeakRSS("Name:\tsluice\nVmPeak:\t  900 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 100 kB\n")
	if err != nil || got != 12345<<10 {
		t.Fatalf("ParsePeakRSS = %d, %v; want %d", got, err, 12345<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t12 MB\n", "VmHWM:\tx kB\n"} {
		if _, err := ParsePeakRSS(bad); err == nil {
			t.Errorf("ParsePeakRSS(%q) succeeded; want an error", bad)
		}
	}
	if self, err := ReadPeakRSS(os.Getpid()); err != nil || self <= 0 {
		t.Fatalf("ReadPeakRSS(self) = %d, %v", self, err)
	}
}
