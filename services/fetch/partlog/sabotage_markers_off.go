//go:build !sabotage_markers

package partlog

// sabotageMarkers is false in every real build; see sabotage_markers_on.go.
const sabotageMarkers = false
