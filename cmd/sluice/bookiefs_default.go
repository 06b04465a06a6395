//go:build !chaos_volatilefs

package main

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// bookieFS is the operating system's filesystem in every real build (see
// bookiefs_volatile.go for the chaos build's).
func bookieFS(*slog.Logger) vfs.FS { return vfs.Default }
