package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

func newACLCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "acl",
		Short: "add, remove or list access rules (ACLs)",
		Long: `Adds, removes or lists the access rules that servers started with --authorization acl
follow: a principal (User:NAME, Service:NAME, or User:* for every user) may (allow) or may
not (deny) do operations on a resource. Deny wins; what no rule allows is denied. The
cluster's own processes and --super-users may do anything. A change holds at once on the
server that made it, and within 5 seconds on the others.`,
	})
	cmd.AddCommand(newACLAddCmd(), newACLRemoveCmd(), newACLListCmd())
	return cmd
}

// aclFlags pick ACLs: the resource (one of the resource flags), the
// principal, operations, pattern type and permission.
type aclFlags struct {
	ep                                            endpoint
	principal                                     string
	cluster                                       bool
	topic, group, trigger, subject, transactional string
	operations                                    string
	prefix, deny, all                             bool

	filter catalog.ACLFilter
	ops    []catalog.Operation
}

// attach gives cmd the ACL flags (those of an added rule when adding, a
// selection's otherwise), refuses arguments, and checks the flags before
// the command runs.
func (f *aclFlags) attach(cmd *cobra.Command, adding bool) *cobra.Command {
	cmd.Args = noArgs
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		var c flagCheck
		f.check(&c, cmd, adding)
		return c.err()
	}
	f.register(cmd, adding)
	return cmd
}

func (f *aclFlags) register(cmd *cobra.Command, adding bool) {
	fs := cmd.Flags()
	f.ep.register(fs)
	fs.StringVar(&f.principal, "principal", "", "User:NAME, Service:NAME or User:* (every user)")
	fs.BoolVar(&f.cluster, "cluster", false, "the resource is the cluster (topic creation by pattern, ACLs, bookies)")
	fs.StringVar(&f.topic, "topic", "", "the resource is this topic (or prefix with --prefix; * for all)")
	fs.StringVar(&f.group, "group", "", "the resource is this consumer group")
	fs.StringVar(&f.trigger, "trigger", "", "the resource is this trigger")
	fs.StringVar(&f.subject, "subject", "", "the resource is this schema subject")
	fs.StringVar(&f.transactional, "transactional-id", "", "the resource is this transactional id")
	fs.StringVar(&f.operations, "operation", "", "comma-separated: produce, consume, describe, create, delete, alter, commit, admin or all")
	fs.BoolVar(&f.prefix, "prefix", false, "the name is a prefix: every resource whose name starts with it")
	fs.BoolVar(&f.deny, "deny", false, "deny instead of allow")
	if !adding {
		fs.BoolVar(&f.all, "all", false, "with no other selection: remove every ACL")
	}
}

// check builds the filter; adding requires a whole ACL.
func (f *aclFlags) check(c *flagCheck, cmd *cobra.Command, adding bool) {
	f.ep.check(c)
	f.filter = catalog.ACLFilter{Principal: f.principal}
	n := 0
	for _, r := range []struct {
		set  bool
		rt   catalog.ResourceType
		name string
	}{
		{f.cluster, catalog.ResourceCluster, catalog.ClusterName},
		{f.topic != "", catalog.ResourceTopic, f.topic},
		{f.group != "", catalog.ResourceGroup, f.group},
		{f.trigger != "", catalog.ResourceTrigger, f.trigger},
		{f.subject != "", catalog.ResourceSubject, f.subject},
		{f.transactional != "", catalog.ResourceTransactionalID, f.transactional},
	} {
		if r.set {
			n++
			f.filter.ResourceType, f.filter.ResourceName = r.rt, r.name
		}
	}
	if n > 1 {
		c.badf("--cluster, --topic, --group, --trigger, --subject and --transactional-id: give one")
	}
	if cmd.Flags().Changed("prefix") || adding {
		f.filter.PatternType = catalog.PatternLiteral
		if f.prefix {
			f.filter.PatternType = catalog.PatternPrefix
		}
	}
	if cmd.Flags().Changed("deny") || adding {
		f.filter.Permission = catalog.Allow
		if f.deny {
			f.filter.Permission = catalog.Deny
		}
	}
	f.ops = nil
	for _, op := range splitList(f.operations) {
		f.ops = append(f.ops, catalog.Operation(strings.ToLower(op)))
	}
	if adding {
		switch {
		case f.principal == "":
			c.badf("--principal is required")
		case n == 0:
			c.badf("a resource is required: --cluster, --topic, --group, --trigger, --subject or --transactional-id")
		case len(f.ops) == 0:
			c.badf("--operation is required")
		}
	}
	if len(f.ops) > 1 && !adding {
		c.badf("--operation: give one to select by (or none for all)")
	}
	for _, op := range f.ops {
		if op != catalog.OpAll && !slices.Contains(catalog.Operations, op) {
			c.badf("--operation %q: want produce, consume, describe, create, delete, alter, commit, admin or all", op)
		}
	}
	if err := catalog.ValidateACLFilter(f.filter); err != nil {
		c.badf("%s", catalogReason(err))
	}
	if len(f.ops) == 1 {
		f.filter.Operation = f.ops[0]
	}
	if !adding && f.all && f.filter != (catalog.ACLFilter{}) {
		c.badf("--all removes every ACL: give it alone, without a selection")
	}
	if !adding && !f.all && f.filter == (catalog.ACLFilter{}) && cmd.Name() == "remove" {
		c.badf("select the ACLs to remove (--principal, a resource, --operation, ...), or --all for every one")
	}
}

func (f *aclFlags) acls() []*sluicev1.Acl {
	var out []*sluicev1.Acl
	for _, op := range f.ops {
		out = append(out, &sluicev1.Acl{Principal: f.filter.Principal, ResourceType: string(f.filter.ResourceType), PatternType: string(f.filter.PatternType),
			ResourceName: f.filter.ResourceName, Operation: string(op), Permission: string(f.filter.Permission)})
	}
	return out
}

func (f *aclFlags) filterMsg() *sluicev1.AclFilter {
	g := f.filter
	return &sluicev1.AclFilter{Principal: g.Principal, ResourceType: string(g.ResourceType), PatternType: string(g.PatternType),
		ResourceName: g.ResourceName, Operation: string(g.Operation), Permission: string(g.Permission)}
}

func newACLAddCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "add --principal P (--cluster|--topic|--group|--trigger|--subject|--transactional-id NAME) --operation OPS",
		Short: "add access rules",
		Example: `  sluice acl add --principal User:alice --topic orders --operation produce,describe
  sluice acl add --principal User:etl --topic logs. --prefix --operation consume
  sluice acl add --principal User:etl --group etl --operation consume,commit
  sluice acl add --principal User:mallory --topic '*' --operation all --deny`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			acls := f.acls()
			if _, err := f.ep.admin().CreateAcls(cmd.Context(), connect.NewRequest(&sluicev1.CreateAclsRequest{Acls: acls})); err != nil {
				return explain(err, f.ep.addr)
			}
			for _, a := range acls {
				fmt.Fprintf(cmd.OutOrStdout(), "added: %s\n", aclLine(a))
			}
			return nil
		},
	}
	return f.attach(cmd, true)
}

func newACLRemoveCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "remove [selection]",
		Short: "remove the access rules a selection picks",
		Long:  "Removes every ACL that the selection picks: each flag given must match, flags not given match anything.",
		Example: `  sluice acl remove --principal User:alice
  sluice acl remove --principal User:etl --topic logs. --prefix --operation consume`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := f.ep.admin().DeleteAcls(cmd.Context(), connect.NewRequest(&sluicev1.DeleteAclsRequest{Filter: f.filterMsg(), All: f.all}))
			if err != nil {
				return explain(err, f.ep.addr)
			}
			for _, a := range resp.Msg.GetAcls() {
				fmt.Fprintf(cmd.OutOrStdout(), "removed: %s\n", aclLine(a))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d ACLs removed\n", len(resp.Msg.GetAcls()))
			return nil
		},
	}
	return f.attach(cmd, false)
}

func newACLListCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "list [selection]",
		Short: "print the access rules (all, or those a selection picks)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return aclList(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	return f.attach(cmd, false)
}

func aclList(ctx context.Context, f aclFlags, out io.Writer) error {
	resp, err := f.ep.admin().ListAcls(ctx, connect.NewRequest(&sluicev1.ListAclsRequest{Filter: f.filterMsg()}))
	if err != nil {
		return explain(err, f.ep.addr)
	}
	fmt.Fprintf(out, "%-32s %-10s %-10s %-17s %-8s %s\n", "PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "PATTERN", "NAME")
	for _, a := range resp.Msg.GetAcls() {
		fmt.Fprintf(out, "%-32s %-10s %-10s %-17s %-8s %s\n", a.GetPrincipal(), a.GetPermission(), a.GetOperation(), a.GetResourceType(), a.GetPatternType(), a.GetResourceName())
	}
	return nil
}

func aclLine(a *sluicev1.Acl) string {
	name := fmt.Sprintf("%q", a.GetResourceName())
	if a.GetPatternType() == string(catalog.PatternPrefix) {
		name = "names starting " + name
	}
	return fmt.Sprintf("%s %s %s on %s %s", a.GetPrincipal(), a.GetPermission(), a.GetOperation(), a.GetResourceType(), name)
}
