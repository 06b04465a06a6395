//go:build !linux

package lambdapool

import "syscall"

// sysProcAttr: the RIE runs on Linux only; elsewhere nothing special.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killMarked is a no-op outside Linux (no /proc to find the processes).
func killMarked(string) {}
