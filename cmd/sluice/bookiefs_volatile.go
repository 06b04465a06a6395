//go:build chaos_volatilefs

package main

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/internal/volatilefs"
)

// bookieFS (build tag chaos_volatilefs, chaos tests only) runs the bookie
// on a filesystem that keeps unsynced writes in process memory, so that
// SIGKILL loses them as a power cut would. Never ship this build.
func bookieFS(log *slog.Logger) vfs.FS {
	log.Warn("chaos build: unsynced writes live in process memory and die with the process (build tag chaos_volatilefs)")
	return volatilefs.New(vfs.Default)
}
