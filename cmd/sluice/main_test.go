package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// `sluice`, `sluice help`, --help and -h print the list of commands, each
// with its summary, on stdout.
func TestHelpListsCommands(t *testing.T) {
	names := []string{"dev", "bookie", "ingest", "fetch", "compactor", "topic", "produce", "consume", "group",
		"bench", "version", "completion", "help"}
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"-h"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 || errOut.Len() > 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
		for _, name := range names {
			if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(out.String()) {
				t.Errorf("%q: help lacks command %q:\n%s", args, name, out.String())
			}
		}
		for _, c := range newRoot(io.Discard, io.Discard).Commands() {
			if c.Short == "" || !strings.Contains(out.String(), c.Short) {
				t.Errorf("%q: help lacks the summary of %s (%q)", args, c.Name(), c.Short)
			}
		}
	}
}

func TestUnknownCommandExits2(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"nope"}, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), "sluice help") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestTopicFlagsBeforeOrAfterTheName(t *testing.T) {
	// Nothing listens on port 1: parsing succeeded when the error is the
	// connection's, not the usage's.
	for _, args := range [][]string{
		{"topic", "create", "t", "--partitions", "2", "--addr", "127.0.0.1:1"},
		{"topic", "create", "--addr", "127.0.0.1:1", "t", "--partitions", "2"},
		{"topic", "create", "--addr", "127.0.0.1:1", "--partitions", "2", "t"},
	} {
		var errOut bytes.Buffer
		code := run(context.Background(), args, io.Discard, &errOut)
		if code == 0 || strings.Contains(errOut.String(), "topic name") || !strings.Contains(errOut.String(), "127.0.0.1:1") {
			t.Errorf("%q: exit %d, stderr %q; want a connection error", args, code, errOut.String())
		}
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"topic", "create", "--addr", "127.0.0.1:1", "a", "b"}, io.Discard, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), `unexpected arguments ["b"]`) {
		t.Errorf("two names: exit %d, stderr %q", code, errOut.String())
	}
}

// --journal-recycle-files is checked with the journal's own bound before
// the bookie opens anything; 0 turns reuse off.
func TestBookieJournalRecycleFlag(t *testing.T) {
	dir := t.TempDir()
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"bookie", "--dir", dir, "--journal-recycle-files", "65"}, io.Discard, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--journal-recycle-files 65: journal config: RecycleFiles 65 above 64") {
		t.Fatalf("exit %d, stderr %q; want 2 and the journal's RecycleFiles bound", code, errOut.String())
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		t.Fatalf("the refused bookie touched its directory: %v, %v", ents, err)
	}
	if recycleFiles(0) >= 0 || recycleFiles(-3) >= 0 || recycleFiles(7) != 7 {
		t.Fatalf("recycleFiles: 0 -> %d, -3 -> %d, 7 -> %d", recycleFiles(0), recycleFiles(-3), recycleFiles(7))
	}
}

func TestDevServesHealthAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, &out, io.Discard)
	}()
	re := regexp.MustCompile(`listening on (http://\S+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("dev did not print its address; output %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Health turns SERVING once ingest took its partitions back (the
	// README says to wait for it): on a loaded machine, some time after the
	// address is printed.
	var body []byte
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(string(body), `{"status":"SERVING"}`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("health = %s after 20 s", body)
		}
		resp, err := http.Post(base+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("dev exited %d after a clean stop", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("dev did not stop after its context ended")
	}
}
