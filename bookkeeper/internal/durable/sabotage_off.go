//go:build !sabotage_dirsync

package durable

// sabotageDirSync is false in every real build (see sabotage_on.go).
const sabotageDirSync = false
