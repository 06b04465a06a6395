package volatilefs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func mustWrite(t *testing.T, f vfs.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, fs vfs.FS, name string) string {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUnsyncedWritesStayInMemory(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	name := filepath.Join(dir, "f")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "synced|")
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "unsynced")

	// Every handle of this FS sees the overlay, as with a page cache.
	if got := readAll(t, fs, name); got != "synced|unsynced" {
		t.Fatalf("read through the FS = %q", got)
	}
	fi, err := fs.Stat(name)
	if err != nil || fi.Size() != int64(len("synced|unsynced")) {
		t.Fatalf("Stat = %v, %v", fi, err)
	}
	if fs.Pending() != int64(len("unsynced")) {
		t.Fatalf("Pending = %d", fs.Pending())
	}
	// The disk holds only what was synced: a process that dies now
	// (a new FS over the same directory) finds the synced prefix.
	if got := readAll(t, vfs.Default, name); got != "synced|" {
		t.Fatalf("on disk = %q, want only the synced prefix", got)
	}
	if got := readAll(t, New(vfs.Default), name); got != "synced|" {
		t.Fatalf("after a crash = %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, vfs.Default, name); got != "synced|unsynced" {
		t.Fatalf("on disk after Sync = %q", got)
	}
	if fs.Pending() != 0 {
		t.Fatalf("Pending after Sync = %d", fs.Pending())
	}
	_ = f.Close()
}

func TestOverwritesAndReadAt(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	name := filepath.Join(dir, "f")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "0123456789")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("ab"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XYZ"), 12); err != nil { // leaves a hole at 10-11
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("c"), 4); err != nil { // later write wins
		t.Fatal(err)
	}
	buf := make([]byte, 20)
	n, err := f.ReadAt(buf, 0)
	if n != 15 || err != io.EOF {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if want := "012ac56789\x00\x00XYZ"; string(buf[:n]) != want {
		t.Fatalf("ReadAt = %q, want %q", buf[:n], want)
	}
	if got := readAll(t, vfs.Default, name); got != "0123456789" {
		t.Fatalf("on disk = %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, vfs.Default, name); got != "012ac56789\x00\x00XYZ" {
		t.Fatalf("on disk after Sync = %q", got)
	}
	_ = f.Close()
}

func TestNamespaceOperationsMoveTheOverlay(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	f, err := fs.Create(a, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "hello")
	_ = f.Close() // closing does not sync: the bytes stay in memory
	if err := fs.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, b); got != "hello" {
		t.Fatalf("renamed file reads %q", got)
	}
	if got := readAll(t, vfs.Default, b); got != "" {
		t.Fatalf("renamed file on disk = %q, want empty (never synced)", got)
	}
	if err := fs.Remove(b); err != nil {
		t.Fatal(err)
	}
	if fs.Pending() != 0 {
		t.Fatalf("Pending after Remove = %d", fs.Pending())
	}
	// A new file under the old name starts empty.
	g, err := fs.Create(b, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, b); got != "" {
		t.Fatalf("recreated file reads %q", got)
	}
	_ = g.Close()
}

func TestMaxPendingWritesBackWithoutSync(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	fs.MaxPending = 8
	name := filepath.Join(dir, "f")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "12345")
	if fs.Pending() != 5 {
		t.Fatalf("Pending = %d", fs.Pending())
	}
	mustWrite(t, f, "6789") // over the bound: written back
	if fs.Pending() != 0 {
		t.Fatalf("Pending over the bound = %d", fs.Pending())
	}
	if got := readAll(t, vfs.Default, name); got != "123456789" {
		t.Fatalf("on disk = %q", got)
	}
	_ = f.Close()
}

// The point of the package: SIGKILL of a process on this FS loses what it
// wrote and did not sync, and the next start (Recover) loses the directory
// entries it did not sync, while pebble (the bookie's index) still recovers
// everything it synced.
func TestSIGKILLLosesUnsyncedData(t *testing.T) {
	if dir := os.Getenv("VOLATILEFS_CHILD_DIR"); dir != "" {
		child(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLLosesUnsyncedData$")
	cmd.Env = append(os.Environ(), "VOLATILEFS_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		_ = cmd.Process.Kill()
		t.Fatalf("child said %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The next start: revert the directory entries no sync made durable.
	if n, err := Recover(vfs.Default, filepath.Join(dir, "undo")); err != nil || n == 0 {
		t.Fatalf("Recover reverted %d operations: %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nodirsync")); !os.IsNotExist(err) {
		t.Fatalf("a synced file whose directory was never synced survived the power cut: %v", err)
	}

	got, err := os.ReadFile(filepath.Join(dir, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "synced|" {
		t.Fatalf("plain file after SIGKILL = %q, want only %q", got, "synced|")
	}

	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{FS: vfs.Default})
	if err != nil {
		t.Fatalf("pebble after SIGKILL: %v", err)
	}
	defer func() { _ = db.Close() }()
	for i := range 200 {
		k := fmt.Appendf(nil, "synced-%03d", i)
		v, closer, err := db.Get(k)
		if err != nil {
			t.Fatalf("synced key %s after SIGKILL: %v", k, err)
		}
		if !bytes.Equal(v, k) {
			t.Fatalf("key %s = %q", k, v)
		}
		_ = closer.Close()
	}
	lost := 0
	for i := range 200 {
		_, closer, err := db.Get(fmt.Appendf(nil, "unsynced-%03d", i))
		if err == pebble.ErrNotFound {
			lost++
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		_ = closer.Close()
	}
	if lost == 0 {
		t.Fatalf("all 200 unsynced pebble writes survived SIGKILL: the FS did not hold them back")
	}
	t.Logf("pebble: 200 synced writes kept, %d of 200 unsynced writes lost", lost)
}

func child(dir string) {
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fs, err := Open(vfs.Default, filepath.Join(dir, "undo"))
	if err != nil {
		fail(err)
	}
	f, err := fs.Create(filepath.Join(dir, "plain"), vfs.WriteCategoryUnspecified)
	if err != nil {
		fail(err)
	}
	if _, err := f.Write([]byte("synced|")); err != nil {
		fail(err)
	}
	if err := f.SyncData(); err != nil {
		fail(err)
	}
	if err := syncDir(fs, dir); err != nil {
		fail(err)
	}

	if _, err := f.Write([]byte("unsynced")); err != nil {
		fail(err)
	}
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{FS: fs})
	if err != nil {
		fail(err)
	}
	for i := range 200 {
		k := fmt.Appendf(nil, "synced-%03d", i)
		if err := db.Set(k, k, pebble.Sync); err != nil {
			fail(err)
		}
		if i == 99 {
			// An sstable, a new manifest and WAL: pebble's files and
			// renames, which it makes durable with directory syncs.
			if err := db.Flush(); err != nil {
				fail(err)
			}
		}
	}
	for i := range 200 {
		k := fmt.Appendf(nil, "unsynced-%03d", i)
		if err := db.Set(k, k, pebble.NoSync); err != nil {
			fail(err)
		}
	}
	// Synced, but its directory entry never is: a power cut may lose it.
	g, err := fs.Create(filepath.Join(dir, "nodirsync"), vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = g.Write([]byte("data"))
	}
	if err == nil {
		err = g.Sync()
	}
	if err != nil {
		fail(err)
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}
