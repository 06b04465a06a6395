package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/registry"
)

// `sluice schema ...`: the schema registry through sluice.v1.SchemaService.

func newSchemaCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "schema",
		Short: "register, get, list, check or delete schemas in the schema registry",
		Long: `Registers, gets, lists, checks or deletes schemas in the schema registry of a Sluice (sluice dev,
or an ingest copy) through its SchemaService. The same registry answers Confluent Schema Registry's
REST API under /registry, for Confluent's serializers. Subjects hold numbered versions of schemas;
a new version must be compatible with the earlier ones as the subject's level says (BACKWARD by
default). Avro, Protobuf (--type PROTOBUF) and JSON Schema (--type JSON).`,
	})
	cmd.AddCommand(newSchemaRegisterCmd(), newSchemaGetCmd(), newSchemaListCmd(), newSchemaCheckCmd(), newSchemaDeleteCmd())
	return cmd
}

// schemaInputFlags are --file, --type and --ref.
type schemaInputFlags struct {
	file, typ string
	refs      []string
	in        *sluicev1.SchemaInput // by check
}

func (f *schemaInputFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.file, "file", "", "the schema's file (- for standard input); required")
	fs.StringVar(&f.typ, "type", "AVRO", "the schema's type: AVRO, PROTOBUF or JSON")
	fs.StringArrayVar(&f.refs, "ref", nil, "a schema it references, NAME=SUBJECT:VERSION (repeatable)")
}

func (f *schemaInputFlags) check(c *flagCheck, stdin io.Reader) {
	f.in = &sluicev1.SchemaInput{Type: strings.ToUpper(f.typ)}
	for _, r := range f.refs {
		name, rest, ok1 := strings.Cut(r, "=")
		subject, v, ok2 := strings.Cut(rest, ":")
		version, err := strconv.Atoi(v)
		if !ok1 || !ok2 || name == "" || subject == "" || err != nil || version < 1 {
			c.badf("--ref %q: want NAME=SUBJECT:VERSION (a version from 1)", r)
			continue
		}
		f.in.References = append(f.in.References, &sluicev1.SchemaReference{Name: name, Subject: subject, Version: int32(version)})
	}
	var b []byte
	var err error
	switch f.file {
	case "":
		c.badf("--file is required (the schema's file, or - for standard input)")
		return
	case "-":
		b, err = io.ReadAll(io.LimitReader(stdin, catalog.MaxSchemaBytes+1))
	default:
		b, err = os.ReadFile(f.file)
	}
	switch {
	case err != nil:
		c.badf("--file %q: %v", f.file, err)
	case len(b) > catalog.MaxSchemaBytes:
		c.badf("--file %q: more than %d bytes, the registry's bound", f.file, catalog.MaxSchemaBytes)
	case len(strings.TrimSpace(string(b))) == 0:
		c.badf("--file %q is empty", f.file)
	}
	f.in.Schema = string(b)
}

// subjectArg checks that args is one subject.
func subjectArg(c *flagCheck, args []string) string {
	s := c.name("subject", args)
	if s != "" {
		if err := catalog.ValidateSubject(s); err != nil {
			c.badf("subject %q: %v", s, err)
		}
	}
	return s
}

// versionFlag reads --version: a number from 1, or latest (0 on the wire).
func versionFlag(c *flagCheck, v string) int32 {
	if v == "latest" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<31-1 {
		c.badf("--version %q: want a version from 1, or latest", v)
	}
	return int32(n)
}

// confluentCode is Confluent's error code a SchemaService error carries.
func confluentCode(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetReason() == registry.ReasonSchemaRegistry {
				return info.GetMetadata()["error_code"]
			}
		}
	}
	return ""
}

// explainSchema adds what to do to the registry's errors.
func explainSchema(err error, addr string) error {
	switch confluentCode(err) {
	case "40405", "40407":
		return fmt.Errorf("%w (delete it without --permanent first)", err)
	case "409":
		return fmt.Errorf("%w ('sluice schema check SUBJECT --file F' shows every reason; the subject's level decides)", err)
	}
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return fmt.Errorf("%w ('sluice schema list' lists the subjects, 'sluice schema list SUBJECT' their versions)", err)
	case connect.CodeUnimplemented:
		return fmt.Errorf("the server at %s does not serve the schema registry (it is on sluice dev and ingest copies): %w", addr, err)
	}
	return explain(err, addr)
}

func newSchemaRegisterCmd() *cobra.Command {
	var ep endpoint
	var subject string
	var in schemaInputFlags
	cmd := &cobra.Command{
		Use:   "register SUBJECT --file SCHEMA",
		Short: "register a schema under a subject",
		Long: `Registers the schema in --file under SUBJECT and prints its version and global schema id: the
version SUBJECT already has for this schema, or a new one if the subject's compatibility level
allows it (the refusal says why not). Confluent's serializers name a topic's value subject
TOPIC-value.`,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			subject = subjectArg(&c, args)
			in.check(&c, cmd.InOrStdin())
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := ep.schemas().RegisterSchema(cmd.Context(), connect.NewRequest(&sluicev1.RegisterSchemaRequest{Subject: subject, Schema: in.in}))
			if err != nil {
				return explainSchema(err, ep.addr)
			}
			v := resp.Msg.GetVersion()
			fmt.Fprintf(cmd.OutOrStdout(), "subject %s version %d: schema id %d\n", v.GetSubject(), v.GetVersion(), v.GetSchema().GetId())
			return nil
		},
	}
	ep.register(cmd.Flags())
	in.register(cmd)
	return cmd
}

func newSchemaGetCmd() *cobra.Command {
	var ep endpoint
	var subject, version string
	var id int64
	var deleted bool
	var v int32
	cmd := &cobra.Command{
		Use:   "get (SUBJECT [--version N] | --id ID)",
		Short: "print a subject's version, or a schema by id",
		Long:  "Prints SUBJECT's --version (latest by default) with its schema id and schema, or with --id the schema with that global id.",
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			switch {
			case id != 0 && len(args) > 0:
				c.badf("takes a SUBJECT or --id, not both")
			case id < 0:
				c.badf("--id %d: schema ids start at 1", id)
			case id == 0:
				subject = subjectArg(&c, args)
				v = versionFlag(&c, version)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out, sc := cmd.Context(), cmd.OutOrStdout(), ep.schemas()
			if id > 0 {
				resp, err := sc.GetSchema(ctx, connect.NewRequest(&sluicev1.GetSchemaRequest{Id: id}))
				if err != nil {
					return explainSchema(err, ep.addr)
				}
				printSchema(out, resp.Msg.GetSchema())
				return nil
			}
			resp, err := sc.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: subject, Version: v, Deleted: deleted}))
			if err != nil {
				return explainSchema(err, ep.addr)
			}
			sv := resp.Msg.GetVersion()
			state := ""
			if sv.GetDeleted() {
				state = " (deleted)"
			}
			fmt.Fprintf(out, "subject %s version %d%s\n", sv.GetSubject(), sv.GetVersion(), state)
			printSchema(out, sv.GetSchema())
			return nil
		},
	}
	ep.register(cmd.Flags())
	cmd.Flags().StringVar(&version, "version", "latest", "the version: a number from 1, or latest")
	cmd.Flags().Int64Var(&id, "id", 0, "print the schema with this global id instead")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "also find a version deleted softly")
	return cmd
}

func printSchema(out io.Writer, s *sluicev1.SchemaInfo) {
	fmt.Fprintf(out, "schema id %d (%s)\n", s.GetId(), s.GetType())
	for _, r := range s.GetReferences() {
		fmt.Fprintf(out, "reference %s = %s version %d\n", r.GetName(), r.GetSubject(), r.GetVersion())
	}
	fmt.Fprintln(out, s.GetSchema())
}

func newSchemaListCmd() *cobra.Command {
	var ep endpoint
	var subject string
	var deleted bool
	cmd := &cobra.Command{
		Use:   "list [SUBJECT]",
		Short: "print the subjects, or a subject's versions",
		Long:  "Prints every subject, one a line, or with SUBJECT its version numbers. --deleted includes what was deleted softly.",
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			if len(args) > 0 {
				subject = subjectArg(&c, args)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out, sc := cmd.Context(), cmd.OutOrStdout(), ep.schemas()
			if subject == "" {
				resp, err := sc.ListSubjects(ctx, connect.NewRequest(&sluicev1.ListSubjectsRequest{Deleted: deleted}))
				if err != nil {
					return explainSchema(err, ep.addr)
				}
				for _, s := range resp.Msg.GetSubjects() {
					fmt.Fprintln(out, s)
				}
				return nil
			}
			resp, err := sc.ListVersions(ctx, connect.NewRequest(&sluicev1.ListVersionsRequest{Subject: subject, Deleted: deleted}))
			if err != nil {
				return explainSchema(err, ep.addr)
			}
			for _, v := range resp.Msg.GetVersions() {
				fmt.Fprintln(out, v)
			}
			return nil
		},
	}
	ep.register(cmd.Flags())
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include subjects and versions deleted softly")
	return cmd
}

func newSchemaCheckCmd() *cobra.Command {
	var ep endpoint
	var subject, version string
	var all bool
	var v int32
	var in schemaInputFlags
	cmd := &cobra.Command{
		Use:   "check SUBJECT --file SCHEMA",
		Short: "check whether a schema may be registered under a subject",
		Long: `Checks the schema in --file against SUBJECT's --version (latest by default), or with --all against
every version the subject's compatibility level reaches, and prints "compatible", or
"incompatible" with the reasons (and exits 1).`,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			subject = subjectArg(&c, args)
			v = versionFlag(&c, version)
			in.check(&c, cmd.InOrStdin())
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := ep.schemas().CheckCompatibility(cmd.Context(), connect.NewRequest(&sluicev1.CheckCompatibilityRequest{
				Subject: subject, Schema: in.in, Version: v, AllVersions: all}))
			if err != nil {
				return explainSchema(err, ep.addr)
			}
			if resp.Msg.GetCompatible() {
				fmt.Fprintln(cmd.OutOrStdout(), "compatible")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "incompatible:\n  %s\n", strings.Join(resp.Msg.GetMessages(), "\n  "))
			return fmt.Errorf("the schema may not follow %s (its compatibility level; 'sluice schema get %s' shows the version it was checked against)", subject, subject)
		},
	}
	ep.register(cmd.Flags())
	in.register(cmd)
	cmd.Flags().StringVar(&version, "version", "latest", "the version to check against: a number from 1, or latest")
	cmd.Flags().BoolVar(&all, "all", false, "check against every version the subject's level reaches (its _TRANSITIVE levels: all)")
	return cmd
}

func newSchemaDeleteCmd() *cobra.Command {
	var ep endpoint
	var subject, version string
	var permanent bool
	var v int32
	cmd := &cobra.Command{
		Use:   "delete SUBJECT [--version N]",
		Short: "delete a subject or one of its versions, softly or for good",
		Long: `Deletes every version of SUBJECT, or with --version one of them, softly: hidden, while their schemas
stay readable by id for the records that use them. --permanent deletes for good what was deleted
softly before; a version number is never given again.`,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			ep.check(&c)
			subject = subjectArg(&c, args)
			if cmd.Flags().Changed("version") {
				v = versionFlag(&c, version)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out, sc := cmd.Context(), cmd.OutOrStdout(), ep.schemas()
			how := "softly"
			if permanent {
				how = "for good"
			}
			if !cmd.Flags().Changed("version") {
				resp, err := sc.DeleteSubject(ctx, connect.NewRequest(&sluicev1.DeleteSubjectRequest{Subject: subject, Permanent: permanent}))
				if err != nil {
					return explainSchema(err, ep.addr)
				}
				fmt.Fprintf(out, "deleted subject %s %s: versions %s\n", subject, how, strings.Trim(fmt.Sprint(resp.Msg.GetVersions()), "[]"))
				return nil
			}
			resp, err := sc.DeleteVersion(ctx, connect.NewRequest(&sluicev1.DeleteVersionRequest{Subject: subject, Version: v, Permanent: permanent}))
			if err != nil {
				return explainSchema(err, ep.addr)
			}
			fmt.Fprintf(out, "deleted subject %s version %d %s\n", subject, resp.Msg.GetVersion(), how)
			return nil
		},
	}
	ep.register(cmd.Flags())
	cmd.Flags().StringVar(&version, "version", "", "delete only this version: a number from 1, or latest")
	cmd.Flags().BoolVar(&permanent, "permanent", false, "delete for good what was deleted softly before")
	return cmd
}
