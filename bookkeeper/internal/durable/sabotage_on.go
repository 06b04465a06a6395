//go:build sabotage_dirsync

package durable

// sabotageDirSync (build tag sabotage_dirsync, chaos tests only):
// CreateWithHeader does not sync the directory after renaming a new file
// into place, so a power cut may lose a new journal file (and the
// acknowledged entries in it) although its bytes were synced. Never ship
// this build: it shows that the chaos power-cut model (internal/volatilefs)
// loses unsynced directory entries and the power-loss scenario sees it.
const sabotageDirSync = true
