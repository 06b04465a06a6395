//go:build chaos_volatilefs

package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/internal/volatilefs"
)

// bookieFS (build tag chaos_volatilefs, chaos tests only) runs the bookie
// on a filesystem that keeps unsynced writes in process memory, so that
// SIGKILL loses them as a power cut would, and that reverts at the next
// start every directory entry (creation, rename, removal) whose directory
// was not synced since — the rest of what a power cut loses. Its undo log
// lives in DIR/volatilefs-undo. Never ship this build.
func bookieFS(log *slog.Logger, cfg bookie.Config) (vfs.FS, error) {
	log.Warn("chaos build: unsynced writes and directory entries die with the process (build tag chaos_volatilefs)")
	if cfg.Dir == "" {
		return nil, fmt.Errorf("the chaos_volatilefs build needs --dir (its undo log lives there)")
	}
	fs, err := volatilefs.Open(vfs.Default, filepath.Join(cfg.Dir, "volatilefs-undo"))
	if err != nil {
		return nil, err
	}
	log.Warn("chaos build: reverted the directory entries the last process did not sync", "operations", fs.Reverted)
	return fs, nil
}
