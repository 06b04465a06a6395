//go:build !sabotage_lso

package partlog

// sabotageLSO is false in every real build; see sabotage_lso_on.go.
const sabotageLSO = false
