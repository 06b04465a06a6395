// Command sluice is Sluice's one binary: the servers (dev, bookie, ingest,
// fetch, compactor), the client commands (topic, trigger, produce, consume,
// group) and the benchmarks.
//
// Run `sluice help` for the list of commands and `sluice COMMAND --help`
// for one command's flags. The commands are cobra commands: flags go
// before or after the arguments, `--` ends the flags, and every command
// checks its whole command line before it touches a file or the network.
// Exit codes: 0 done, 1 failed while running, 2 a command line that
// cannot run (unknown command or flag, missing or surplus argument, a
// value out of range).
//
// File map: main.go the command tree and exit codes; cli.go usage errors
// and flag checks; one file per command (clientcmds.go: topic and
// produce; consumecmds.go: consume and group; bench.go and
// benchledger.go: the benchmarks).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."; empty
// reads as a development build (versionString).
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code: 0, 1 for an
// error while running (printed as "sluice COMMAND: error"), 2 for a usage
// error (printed with a pointer to the command's help).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, newRoot(stdout, stderr), args)
}

// execute is run with the command tree given.
func execute(ctx context.Context, root *cobra.Command, args []string) int {
	stderr := root.ErrOrStderr()
	// started: cobra parsed the command line and the command's own checks
	// run next. Errors before that (cobra's own: an unknown flag of its
	// completion command, say) are usage errors too.
	started := false
	root.PersistentPreRun = func(*cobra.Command, []string) { started = true }
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	// Every line of the error (joined errors: one problem a line) starts
	// with the command.
	// The SDK's errors start with its package name ("sluice: "), which the
	// command path already says.
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), strings.TrimPrefix(line, "sluice: "))
	}
	var ue usageError
	if !errors.As(err, &ue) && started {
		return 1
	}
	if ue.hint == "" {
		ue.hint = fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
	}
	fmt.Fprintln(stderr, ue.hint)
	return 2
}

// Command groups of `sluice help`.
const (
	groupServers = "servers"
	groupClients = "clients"
	groupOther   = "other"
)

// newRoot builds the command tree, writing to stdout and stderr. It is
// built afresh for every run: cobra commands keep the flags they parsed.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := holdsCommands(&cobra.Command{
		Use:   "sluice",
		Short: "Sluice - a distributed, replicated log and message queue",
		Long: `Sluice - a distributed, replicated log and message queue.

One binary for the servers, the client commands and the benchmarks. Every
command takes --help. Flags go before or after a command's arguments; --
ends the flags (sluice produce --topic t -- --not-a-flag).`,
		SilenceErrors: true, // run prints them, with the exit code's rules
		SilenceUsage:  true,
	})
	root.SetOut(stdout) // before the completion commands: they keep it
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddGroup(
		&cobra.Group{ID: groupServers, Title: "Servers:"},
		&cobra.Group{ID: groupClients, Title: "Client commands:"},
		&cobra.Group{ID: groupOther, Title: "Other commands:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupServers,
		newDevCmd(),
		newBookieCmd(),
		newIngestCmd(),
		newFetchCmd(),
		newCompactorCmd())
	add(groupClients,
		newTopicCmd(),
		newTriggerCmd(),
		newProduceCmd(produce),
		newCopyCmd(),
		newConsumeCmd(consume),
		newGroupCmd(),
		newLedgerCmd(),
		newSchemaCmd(),
		newACLCmd())
	add(groupOther, newBenchCmd(), newAuthCmd(), newVersionCmd())
	root.SetHelpCommand(newHelpCmd())
	root.SetHelpCommandGroupID(groupOther)
	root.SetCompletionCommandGroupID(groupOther)
	// cobra adds these two when it executes; added now, the tree is whole
	// (for the tests that walk it) and completion behaves like topic.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		c.Short = "print the shell completion script for bash, zsh, fish or powershell"
		holdsCommands(c)
		for _, sh := range c.Commands() {
			sh.Short = "print the " + sh.Name() + " completion script (its help says how to load it)"
		}
	}
	// No command takes file names as arguments: complete none.
	var noFiles func(*cobra.Command)
	noFiles = func(c *cobra.Command) {
		if c.ValidArgsFunction == nil {
			c.ValidArgsFunction = cobra.NoFileCompletions
		}
		for _, sub := range c.Commands() {
			noFiles(sub)
		}
	}
	noFiles(root)
	return root
}

// newHelpCmd replaces cobra's help command, which prints the root's help
// and succeeds for a command that does not exist.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]...",
		Short: "print the list of commands, or one command's help",
		Long:  "Prints the list of commands, or with a command (sluice help topic create) its help, the same as its --help.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return usageError{err: err}
			}
			if len(rest) > 0 {
				return unknownCommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag() // so that its flags list shows --help
			return cmd.Help()
		},
	}
}

// versionString is the version set at build time, else "development
// build" with the commit the binary was built from when Go recorded it.
func versionString() string {
	if version != "" {
		return version
	}
	s := "development build"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			s += " (commit " + rev
			if modified == "true" {
				s += ", modified"
			}
			s += ")"
		}
	}
	return s
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "sluice %s\n", versionString())
			return err
		},
	}
}
