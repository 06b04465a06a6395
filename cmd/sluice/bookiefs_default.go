//go:build !chaos_volatilefs

package main

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
)

// bookieFS is the operating system's filesystem in every real build (see
// bookiefs_volatile.go for the chaos build's).
func bookieFS(*slog.Logger, bookie.Config) (vfs.FS, error) { return vfs.Default, nil }
