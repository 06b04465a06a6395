package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// The command-line plumbing every command shares: usage errors, commands
// that only hold commands, checks of flag values.
//
// A command checks its whole command line before it does anything (no
// file, no network), collects every problem (flagCheck) and returns them
// as one usageError: run exits 2 for it and points at the command's
// --help. Errors met while running exit 1.

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
	// `sluice prodce --topic t`: the command is what is wrong (pflag
	// collected the arguments before the flag it failed on).
	if cmd.HasSubCommands() && cmd.Flags().NArg() > 0 {
		if sub, _, ferr := cmd.Find(cmd.Flags().Args()[:1]); ferr != nil || sub == cmd {
			return unknownCommand(cmd, cmd.Flags().Arg(0))
		}
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		name, _, _ := strings.Cut(ne.GetSpecifiedShortnames(), "=")
		if len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			err = fmt.Errorf("%w (long flags take two dashes: --%s)", err, name)
		}
	}
	return usageError{err: err}
}

// flagCheck collects what is wrong with a command line, so that every
// problem is reported at once. Messages name the flag, its value and what
// it takes.
type flagCheck struct {
	errs []error
}

func (c *flagCheck) badf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// err is nil or a usageError with every problem.
func (c *flagCheck) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return usageError{err: errors.Join(c.errs...)}
}

// required checks that the string flag is set.
func (c *flagCheck) required(flag, v string) {
	if v == "" {
		c.badf("--%s is required", flag)
	}
}

// intIn checks lo <= v <= hi.
func (c *flagCheck) intIn(flag string, v, lo, hi int) {
	if v < lo || v > hi {
		c.badf("--%s %d: want %d..%d", flag, v, lo, hi)
	}
}

// positive checks a duration that must be above zero, and at most max
// when max > 0.
func (c *flagCheck) positive(flag string, d, max time.Duration) {
	switch {
	case d <= 0 && max > 0:
		c.badf("--%s %v: want a positive duration up to %v", flag, d, max)
	case d <= 0:
		c.badf("--%s %v: want a positive duration", flag, d)
	case max > 0 && d > max:
		c.badf("--%s %v: want a positive duration up to %v", flag, d, max)
	}
}

// oneOf checks an enumerated flag.
func (c *flagCheck) oneOf(flag, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.badf("--%s %q: want %s", flag, v, orList(allowed))
}

// maxRequestBytes checks --max-request-bytes, which every public server
// takes, with the RPC server's own bounds.
func (c *flagCheck) maxRequestBytes(v int) {
	if err := (rpcserver.Config{MaxRequestBytes: v}).Validate(); err != nil {
		c.badf("--max-request-bytes %d: %v", v, err)
	}
}

// logFormat checks --log-format, which every server takes.
func (c *flagCheck) logFormat(v string) { c.oneOf("log-format", v, "text", "json") }

// listenAddr checks an address to listen on: HOST:PORT, port 0 picking a
// free one.
func (c *flagCheck) listenAddr(flag, v string) {
	if _, port, err := net.SplitHostPort(v); err != nil || !validPort(port, true) {
		c.badf("--%s %q: want HOST:PORT (port 0..65535; 0 picks a free one)", flag, v)
	}
}

// advertiseAddr checks an address other nodes connect to (empty: unset).
func (c *flagCheck) advertiseAddr(flag, v string) {
	if v == "" {
		return
	}
	if host, port, err := net.SplitHostPort(v); err != nil || host == "" || !validPort(port, false) {
		c.badf("--%s %q: want HOST:PORT that other nodes can reach (port 1..65535)", flag, v)
	}
}

// serverAddr checks the address of a Sluice server a client command
// talks to: HOST:PORT or an http:// or https:// URL.
func (c *flagCheck) serverAddr(flag, v string) {
	if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			return
		}
	} else if _, port, err := net.SplitHostPort(v); err == nil && validPort(port, false) {
		return
	}
	c.badf("--%s %q: want HOST:PORT or http(s)://HOST:PORT", flag, v)
}

// rate checks a messages/s flag: finite, within [lo, hi].
func (c *flagCheck) rate(flag string, v, lo, hi float64, what string) {
	if math.IsNaN(v) || v < lo || v > hi {
		c.badf("--%s %v: want %s", flag, v, what)
	}
}

func validPort(s string, zeroOK bool) bool {
	p, err := strconv.Atoi(s)
	return err == nil && p <= 65535 && (p > 0 || (zeroOK && p == 0))
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// splitList splits a comma-separated flag value; empty means none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// origins checks a comma-separated list of browser origins with the RPC
// server's own rule and returns it.
func (c *flagCheck) origins(flag, v string) []string {
	list := splitList(v)
	for _, o := range list {
		if err := (rpcserver.Config{CORSOrigins: []string{o}}).Validate(); err != nil {
			c.badf("--%s: origin %q: want scheme://host[:port] or *", flag, o)
		}
	}
	return list
}

// catalogID checks an id the catalog will record (a bookie's, an ingest
// copy's) with the catalog's rule.
func (c *flagCheck) catalogID(flag, v string) {
	if err := catalog.ValidateID(flag, v); err != nil {
		c.badf("--%s %q: %s", flag, v, catalogReason(err))
	}
}

// catalogErrs adds every error joined in err (a catalog validation: one a
// field), each after prefix, without the catalog's own prefix.
func (c *flagCheck) catalogErrs(prefix string, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ve *catalog.ValidationError
		if errors.As(e, &ve) {
			c.badf("%s%s: %s", prefix, ve.Field, ve.Reason)
		} else {
			c.badf("%s%v", prefix, e)
		}
	}
}

// catalogReason is a catalog validation error's reason alone.
func catalogReason(err error) string {
	if ve := (*catalog.ValidationError)(nil); errors.As(err, &ve) {
		return ve.Reason
	}
	return err.Error()
}

// noneIfZero maps a zero age or grace flag to what the compactor's config
// spells "none" (a negative value): there, zero means the default.
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// objectsURL checks an object store URL (empty: unset) by the rules of
// objstore.Open, which cannot run here: it creates file:// directories.
func (c *flagCheck) objectsURL(flag, v string) {
	if v == "" {
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		c.badf("--%s %q: %v", flag, v, err)
	case u.Scheme == "s3" && u.Host != "", u.Scheme == "mem":
	case u.Scheme == "file" && (u.Host == "" || u.Host == "localhost") && strings.HasPrefix(u.Path, "/"):
	default:
		c.badf("--%s %q: want s3://BUCKET?region=R[&endpoint=URL&use_path_style=true] or file:///ABSOLUTE/DIR", flag, v)
	}
}

// kvFlag is a repeatable key=value flag.
type kvFlag struct{ m map[string]string }

func (f *kvFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		parts = append(parts, k+"="+f.m[k])
	}
	return strings.Join(parts, ",")
}

func (f *kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = v
	return nil
}

func (f *kvFlag) Type() string { return "key=value" }

// completeValues registers an enumerated flag's values for shell
// completion.
func completeValues(cmd *cobra.Command, flag string, values ...string) {
	if err := cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err) // no such flag: a programmer error
	}
}

// logFormatFlag registers --log-format, which every server takes.
// maxRequestBytesFlag registers --max-request-bytes.
func maxRequestBytesFlag(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVar(v, "max-request-bytes", 4<<20, "largest request message accepted, in bytes (at most 64 MiB); a larger one is refused with INVALID_ARGUMENT naming this flag")
}

func logFormatFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "log-format", "text", "log format: text or json")
	completeValues(cmd, "log-format", "text", "json")
}
