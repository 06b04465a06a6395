package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command-line plumbing every command shares: usage errors, commands
// that only hold commands.

// usageError is a command line that cannot run as written: an unknown
// command or flag, a missing or surplus argument, a flag value out of its
// range.
type usageError struct {
	err error
	// hint replaces the "Run '... --help' for usage." line run prints
	// after the error.
	hint string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{err: fmt.Errorf(format, args...)}
}

// unknownCommand is the usage error for `sluice PARENT NAME` where PARENT
// has no command NAME.
func unknownCommand(parent *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if parent.SuggestionsMinimumDistance <= 0 {
		parent.SuggestionsMinimumDistance = 2 // cobra's default, set only where it suggests
	}
	if s := parent.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	hint := fmt.Sprintf("Run '%s --help' for its commands.", parent.CommandPath())
	if !parent.HasParent() {
		hint = "Run 'sluice help' for the list of commands."
	}
	return usageError{err: errors.New(msg), hint: hint}
}

// holdsCommands makes cmd a command that only holds subcommands: alone it
// prints its help, with an unknown subcommand it is a usage error (cobra
// would print the help and succeed).
func holdsCommands(cmd *cobra.Command) *cobra.Command {
	cmd.DisableFlagsInUseLine = true
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
}

// noArgs is cobra.Args for commands that take flags only.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return unknownCommand(cmd, args[0])
		}
		return usagef("unexpected arguments %q (this command takes flags only)", args)
	}
	return nil
}

// flagError is the root's cobra.FlagErrorFunc: pflag's errors (unknown
// flag, bad value) are usage errors. A long flag written with one dash, as
// the standard flag package allowed, gets a hint.
func flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		name, _, _ := strings.Cut(ne.GetSpecifiedShortnames(), "=")
		if len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			err = fmt.Errorf("%w (long flags take two dashes: --%s)", err, name)
		}
	}
	return usageError{err: err}
}
