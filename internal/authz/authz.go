// Package authz decides whether a principal may do an operation on a
// resource (docs/DESIGN.md §2.12, "Authorization"), from the ACLs in the
// catalog: deny wins over allow, and what no ACL allows is denied. The
// cluster's own processes (Service principals) and the configured
// super-users may do anything.
//
// Every RPC of the public servers goes through Interceptor, which maps the
// procedure (and, for streams, each message) to the actions it needs with
// the table in rules.go; a procedure without a rule is refused, so an RPC
// added without one fails closed (and fails the matrix test).
package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Anonymous is the principal of a caller without credentials (servers
// with --auth none): ACLs may grant it, as Kafka's User:ANONYMOUS.
var Anonymous = auth.Principal{Kind: auth.User, Name: "ANONYMOUS"}

// DefaultRefresh is how old the cached ACLs may grow before they are
// read again: an ACL changed through another copy takes effect within it
// (at once on the copy that changed it).
const DefaultRefresh = 5 * time.Second

// Action is an operation on a resource.
type Action struct {
	Op   catalog.Operation
	Type catalog.ResourceType
	Name string
}

func (a Action) String() string { return fmt.Sprintf("%s on %s %q", a.Op, a.Type, a.Name) }

// ErrDenied is the error of a refused action (PermissionDenied at the
// edge).
var ErrDenied = errors.New("not authorized")

// Config configures an Authorizer.
type Config struct {
	// ACLs is where the rules are (the catalog). Required.
	ACLs catalog.ACLs
	// SuperUsers may do anything ("User:admin").
	SuperUsers []string
	// Refresh is DefaultRefresh when zero.
	Refresh time.Duration
	// Logger hears of failed refreshes (the previous ACLs stay in force).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authorizer evaluates actions against the catalog's ACLs, cached.
type Authorizer struct {
	cfg   Config
	super map[string]bool

	// refreshing is held by the one refresh in flight (TryLock: callers
	// never wait for it). Taken before mu.
	refreshing sync.Mutex
	// mu guards the fields below. Leaf lock.
	mu       sync.Mutex
	byPrin   map[string][]catalog.ACL // principal (incl. "User:*") → its ACLs
	loadedAt time.Time
}

// New reads the ACLs once (failing if it cannot) and returns the
// authorizer.
func New(ctx context.Context, cfg Config) (*Authorizer, error) {
	if cfg.ACLs == nil {
		return nil, errors.New("authz: no ACL store")
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Authorizer{cfg: cfg, super: map[string]bool{}}
	for _, s := range cfg.SuperUsers {
		if err := catalog.ValidatePrincipal("super user", s, false); err != nil {
			return nil, fmt.Errorf("authz: %w", err)
		}
		a.super[s] = true
	}
	if err := a.Reload(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the ACLs now: after this copy changed them, so the change
// is in force here at once.
func (a *Authorizer) Reload(ctx context.Context) error {
	acls, err := a.cfg.ACLs.ListACLs(ctx, catalog.ACLFilter{})
	if err != nil {
		return fmt.Errorf("authz: read ACLs: %w", err)
	}
	by := map[string][]catalog.ACL{}
	for _, x := range acls {
		by[x.Principal] = append(by[x.Principal], x)
	}
	a.mu.Lock()
	a.byPrin, a.loadedAt = by, a.cfg.Now()
	a.mu.Unlock()
	return nil
}

// maybeRefresh starts a reload in the background when the ACLs are due
// and none is in flight; callers go on with the ACLs they have.
func (a *Authorizer) maybeRefresh() {
	a.mu.Lock()
	due := a.cfg.Now().Sub(a.loadedAt) >= a.cfg.Refresh
	a.mu.Unlock()
	if !due || !a.refreshing.TryLock() {
		return
	}
	go func() { // owned by the refreshing lock: at most one at a time
		defer a.refreshing.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Refresh)
		defer cancel()
		if err := a.Reload(ctx); err != nil {
			a.cfg.Logger.Warn("ACL refresh failed; the ACLs read before stay in force", "err", err)
		}
	}()
}

// Authorize returns nil when p may do every action, else an error wrapping
// ErrDenied that names the principal and the first action refused.
func (a *Authorizer) Authorize(p auth.Principal, acts ...Action) error {
	if p.IsZero() {
		p = Anonymous
	}
	if p.Kind == auth.Service || a.super[p.String()] {
		return nil
	}
	a.maybeRefresh()
	a.mu.Lock()
	own, any := a.byPrin[p.String()], a.byPrin["User:*"]
	a.mu.Unlock()
	if p.Kind != auth.User {
		any = nil
	}
	for _, act := range acts {
		if !decide(own, any, act) {
			return fmt.Errorf("%w: %s may not %s", ErrDenied, p, act)
		}
	}
	return nil
}

// Allowed is Authorize as a yes or no (listing filters).
func (a *Authorizer) Allowed(p auth.Principal, act Action) bool { return a.Authorize(p, act) == nil }

// impliesDescribe are the operations whose allow implies describe (as
// Kafka's READ, WRITE, DELETE and ALTER imply DESCRIBE).
var impliesDescribe = []catalog.Operation{catalog.OpProduce, catalog.OpConsume, catalog.OpCommit, catalog.OpAlter, catalog.OpDelete}

// decide: a deny that covers act refuses it; else an allow permits it;
// else it is refused.
func decide(own, any []catalog.ACL, act Action) bool {
	allowed := false
	for _, set := range [][]catalog.ACL{own, any} {
		for _, x := range set {
			if !x.Matches(act.Type, act.Name) {
				continue
			}
			exact := x.Operation == act.Op || x.Operation == catalog.OpAll
			if x.Permission == catalog.Deny && exact {
				return false
			}
			if x.Permission == catalog.Allow && (exact || (act.Op == catalog.OpDescribe && slices.Contains(impliesDescribe, x.Operation))) {
				allowed = true
			}
		}
	}
	return allowed
}

// AuthorizeTrigger says whether a trigger may run now: its RunAs principal
// may consume its topic and produce to its on-failure topic. A trigger
// without RunAs (made without authentication, or by the cluster's own
// processes) runs.
func (a *Authorizer) AuthorizeTrigger(spec catalog.TriggerSpec) error {
	if spec.RunAs == "" {
		return nil
	}
	p, err := auth.ParsePrincipal(spec.RunAs)
	if err != nil {
		return fmt.Errorf("%w: the trigger runs as %q: %w", ErrDenied, spec.RunAs, err)
	}
	acts := []Action{{Op: catalog.OpConsume, Type: catalog.ResourceTopic, Name: spec.Topic}}
	if spec.OnFailureTopic != "" {
		acts = append(acts, Action{Op: catalog.OpProduce, Type: catalog.ResourceTopic, Name: spec.OnFailureTopic})
	}
	return a.Authorize(p, acts...)
}
