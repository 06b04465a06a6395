package catalog

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ACLs: who may do what to which resource (docs/DESIGN.md §2.12,
// "Authorization"). An ACL binds a principal, a resource pattern and an
// operation to allow or deny; the authorizer (internal/authz) evaluates
// them, deny winning. The catalog stores them; all six fields together are
// an ACL's identity, so adding one that exists changes nothing.

// ResourceType is the kind of resource an ACL is about.
type ResourceType string

// The resource types.
const (
	ResourceCluster         ResourceType = "cluster" // the one resource named "cluster": topics created, ACLs, bookies
	ResourceTopic           ResourceType = "topic"
	ResourceGroup           ResourceType = "group"
	ResourceTrigger         ResourceType = "trigger"
	ResourceSubject         ResourceType = "subject" // a schema registry subject
	ResourceTransactionalID ResourceType = "transactional_id"
)

// ResourceTypes lists every resource type.
var ResourceTypes = []ResourceType{ResourceCluster, ResourceTopic, ResourceGroup, ResourceTrigger, ResourceSubject, ResourceTransactionalID}

// ClusterName is the name of the cluster resource.
const ClusterName = "cluster"

// PatternType says how an ACL's resource name matches.
type PatternType string

// The pattern types.
const (
	// PatternLiteral matches the name exactly; the name "*" matches every
	// resource of the type.
	PatternLiteral PatternType = "literal"
	// PatternPrefix matches every name that starts with it.
	PatternPrefix PatternType = "prefix"
)

// Operation is what an ACL allows or denies.
type Operation string

// The operations.
const (
	OpProduce  Operation = "produce"
	OpConsume  Operation = "consume"
	OpDescribe Operation = "describe" // implied by produce, consume, commit, alter, delete
	OpCreate   Operation = "create"
	OpDelete   Operation = "delete"
	OpAlter    Operation = "alter"
	OpCommit   Operation = "commit"
	OpAdmin    Operation = "admin"
	OpAll      Operation = "all" // any operation
)

// Operations lists every operation but OpAll.
var Operations = []Operation{OpProduce, OpConsume, OpDescribe, OpCreate, OpDelete, OpAlter, OpCommit, OpAdmin}

// Permission is an ACL's verdict.
type Permission string

// The permissions.
const (
	Allow Permission = "allow"
	Deny  Permission = "deny"
)

// ACL is one access rule.
type ACL struct {
	// Principal is "User:NAME" or "Service:NAME"; "User:*" is every user.
	Principal    string
	ResourceType ResourceType
	PatternType  PatternType
	// ResourceName is the name, the prefix, or "*" (literal only).
	ResourceName string
	Operation    Operation
	Permission   Permission
}

// Bounds of ACLs.
const (
	// MaxACLs bounds the ACLs a catalog holds: the authorizer keeps them
	// all in memory and reads them all on every refresh.
	MaxACLs = 10_000
	// MaxACLsPerCall bounds one CreateACLs.
	MaxACLsPerCall = 100
	// MaxACLResourceNameLength bounds a resource name or prefix.
	MaxACLResourceNameLength = 255
	// MaxPrincipalNameLength bounds the NAME of a principal.
	MaxPrincipalNameLength = 256
)

// principalNameRE is what the NAME of a principal may hold: printable
// ASCII without spaces or commas, which would make listings and flags
// ambiguous. E-mail addresses, URIs (spiffe://...) and DNS names pass.
var principalNameRE = regexp.MustCompile(`^[A-Za-z0-9._@:/+=\-]{1,256}$`)

// ValidPrincipalName reports whether name can be a principal's NAME.
func ValidPrincipalName(name string) bool { return principalNameRE.MatchString(name) }

// ValidatePrincipal checks "User:NAME" or "Service:NAME" ("User:*" when
// wildcard is true).
func ValidatePrincipal(field, p string, wildcard bool) error {
	kind, name, ok := strings.Cut(p, ":")
	if !ok || (kind != "User" && kind != "Service") {
		return Invalid(field, "principal %q: want User:NAME or Service:NAME", p)
	}
	if wildcard && kind == "User" && name == "*" {
		return nil
	}
	if !ValidPrincipalName(name) {
		return Invalid(field, "principal %q: NAME must be 1..%d of A-Z a-z 0-9 . _ @ : / + = -", p, MaxPrincipalNameLength)
	}
	return nil
}

// ValidateACL checks every field of an ACL.
func ValidateACL(a ACL) error {
	if err := ValidatePrincipal("principal", a.Principal, true); err != nil {
		return err
	}
	if !slices.Contains(ResourceTypes, a.ResourceType) {
		return Invalid("resource_type", "%q: want one of %s", a.ResourceType, joinAny(ResourceTypes))
	}
	if a.PatternType != PatternLiteral && a.PatternType != PatternPrefix {
		return Invalid("pattern_type", "%q: want literal or prefix", a.PatternType)
	}
	switch {
	case a.ResourceName == "":
		return Invalid("resource_name", "is empty")
	case len(a.ResourceName) > MaxACLResourceNameLength:
		return Invalid("resource_name", "is %d bytes, more than %d", len(a.ResourceName), MaxACLResourceNameLength)
	case a.ResourceName == "*" && a.PatternType == PatternPrefix:
		return Invalid("resource_name", `"*" is a literal wildcard; a prefix ACL names its prefix`)
	case a.ResourceType == ResourceCluster && a.ResourceName != ClusterName && a.ResourceName != "*":
		return Invalid("resource_name", "the cluster resource is named %q", ClusterName)
	}
	if err := validatePrintable("resource_name", a.ResourceName); err != nil {
		return err
	}
	if a.Operation != OpAll && !slices.Contains(Operations, a.Operation) {
		return Invalid("operation", "%q: want one of %s or all", a.Operation, joinAny(Operations))
	}
	if a.Permission != Allow && a.Permission != Deny {
		return Invalid("permission", "%q: want allow or deny", a.Permission)
	}
	return nil
}

func joinAny[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// Matches reports whether the ACL's resource pattern covers resource name
// of type rt.
func (a ACL) Matches(rt ResourceType, name string) bool {
	if a.ResourceType != rt {
		return false
	}
	if a.PatternType == PatternPrefix {
		return strings.HasPrefix(name, a.ResourceName)
	}
	return a.ResourceName == "*" || a.ResourceName == name
}

// ACLFilter selects ACLs: every empty field matches anything.
type ACLFilter struct {
	Principal    string
	ResourceType ResourceType
	PatternType  PatternType
	ResourceName string
	Operation    Operation
	Permission   Permission
}

// ValidateACLFilter checks that each set field of f is one an ACL could
// hold.
func ValidateACLFilter(f ACLFilter) error {
	if f.Principal != "" {
		if err := ValidatePrincipal("principal", f.Principal, true); err != nil {
			return err
		}
	}
	if f.ResourceType != "" && !slices.Contains(ResourceTypes, f.ResourceType) {
		return Invalid("resource_type", "%q: want one of %s", f.ResourceType, joinAny(ResourceTypes))
	}
	if f.PatternType != "" && f.PatternType != PatternLiteral && f.PatternType != PatternPrefix {
		return Invalid("pattern_type", "%q: want literal or prefix", f.PatternType)
	}
	if f.ResourceName != "" {
		if len(f.ResourceName) > MaxACLResourceNameLength {
			return Invalid("resource_name", "is %d bytes, more than %d", len(f.ResourceName), MaxACLResourceNameLength)
		}
		if err := validatePrintable("resource_name", f.ResourceName); err != nil {
			return err
		}
	}
	if f.Operation != "" && f.Operation != OpAll && !slices.Contains(Operations, f.Operation) {
		return Invalid("operation", "%q: want one of %s or all", f.Operation, joinAny(Operations))
	}
	if f.Permission != "" && f.Permission != Allow && f.Permission != Deny {
		return Invalid("permission", "%q: want allow or deny", f.Permission)
	}
	return nil
}

// Selects reports whether f selects a (each set field equal).
func (f ACLFilter) Selects(a ACL) bool {
	return (f.Principal == "" || f.Principal == a.Principal) &&
		(f.ResourceType == "" || f.ResourceType == a.ResourceType) &&
		(f.PatternType == "" || f.PatternType == a.PatternType) &&
		(f.ResourceName == "" || f.ResourceName == a.ResourceName) &&
		(f.Operation == "" || f.Operation == a.Operation) &&
		(f.Permission == "" || f.Permission == a.Permission)
}

// ACLs stores access rules.
type ACLs interface {
	// CreateACLs stores acls; those already stored change nothing.
	// Errors: *ValidationError (every ACL checked; at most
	// MaxACLsPerCall), ErrLimitExceeded (the catalog would hold more
	// than MaxACLs).
	CreateACLs(ctx context.Context, acls []ACL) error
	// DeleteACLs removes the ACLs f selects and returns them. Errors:
	// *ValidationError (a set field that no ACL could hold).
	DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
	// ListACLs returns the ACLs f selects, ordered by principal, resource
	// type, pattern type, resource name, operation, permission.
	ListACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
}

// ACLDriver is the storage a backend gives ACLs (Catalog implements ACLs
// over it: the filters and the bound are the same for every backend).
type ACLDriver interface {
	// PutACLs stores acls (valid, distinct); those already stored change
	// nothing.
	PutACLs(ctx context.Context, acls []ACL) error
	// RemoveACLs removes acls; those not stored are skipped.
	RemoveACLs(ctx context.Context, acls []ACL) error
	// AllACLs returns every stored ACL, in any order.
	AllACLs(ctx context.Context) ([]ACL, error)
}

// CompareACL orders ACLs as ListACLs returns them.
func CompareACL(a, b ACL) int {
	for _, c := range [][2]string{
		{a.Principal, b.Principal}, {string(a.ResourceType), string(b.ResourceType)}, {string(a.PatternType), string(b.PatternType)},
		{a.ResourceName, b.ResourceName}, {string(a.Operation), string(b.Operation)}, {string(a.Permission), string(b.Permission)},
	} {
		if r := strings.Compare(c[0], c[1]); r != 0 {
			return r
		}
	}
	return 0
}

// ACLKey is an ACL's identity as one string, for backends' keys: the
// fields joined by a byte none of them may hold (0x1f).
func ACLKey(a ACL) string {
	return strings.Join([]string{a.Principal, string(a.ResourceType), string(a.PatternType), a.ResourceName, string(a.Operation), string(a.Permission)}, "\x1f")
}

// ParseACLKey is ACLKey's inverse.
func ParseACLKey(k string) (ACL, error) {
	f := strings.Split(k, "\x1f")
	if len(f) != 6 {
		return ACL{}, Invalid("acl key", "%q has %d fields, want 6", k, len(f))
	}
	a := ACL{Principal: f[0], ResourceType: ResourceType(f[1]), PatternType: PatternType(f[2]), ResourceName: f[3], Operation: Operation(f[4]), Permission: Permission(f[5])}
	return a, ValidateACL(a)
}

// CreateACLs implements ACLs. Checked: the count, ValidateACL. It reads
// the stored ACLs first (to skip those stored and keep the bound), so it
// makes two driver calls.
func (c *Catalog) CreateACLs(ctx context.Context, acls []ACL) error {
	if len(acls) == 0 {
		return nil
	}
	if len(acls) > MaxACLsPerCall {
		return Invalid("acls", "%d in one call, more than %d", len(acls), MaxACLsPerCall)
	}
	for _, a := range acls {
		if err := ValidateACL(a); err != nil {
			return err
		}
	}
	have, err := c.d.AllACLs(ctx)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(have))
	for _, a := range have {
		known[ACLKey(a)] = true
	}
	var add []ACL
	for _, a := range acls {
		if k := ACLKey(a); !known[k] {
			known[k] = true
			add = append(add, a)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if len(have)+len(add) > MaxACLs {
		return fmt.Errorf("%w: the catalog holds %d ACLs; %d more would pass the bound of %d", ErrLimitExceeded, len(have), len(add), MaxACLs)
	}
	return c.d.PutACLs(ctx, add)
}

// DeleteACLs implements ACLs. Checked: ValidateACLFilter (by ListACLs).
func (c *Catalog) DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	gone, err := c.ListACLs(ctx, f)
	if err != nil || len(gone) == 0 {
		return gone, err
	}
	return gone, c.d.RemoveACLs(ctx, gone)
}

// ListACLs implements ACLs. Checked: ValidateACLFilter.
func (c *Catalog) ListACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	if err := ValidateACLFilter(f); err != nil {
		return nil, err
	}
	all, err := c.d.AllACLs(ctx)
	if err != nil {
		return nil, err
	}
	var out []ACL
	for _, a := range all {
		if f.Selects(a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, CompareACL)
	return out, nil
}
