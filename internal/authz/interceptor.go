package authz

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/auth"
)

// Interceptor checks every call against the rules: unary requests before
// the handler, each message of a client or bidi stream as the handler
// receives it, list answers filtered. A procedure with no rule is refused.
func (a *Authorizer) Interceptor() connect.Interceptor { return interceptor{a: a} }

type interceptor struct{ a *Authorizer }

// check decides msg of procedure for p.
func (i interceptor) check(procedure string, p auth.Principal, msg any) error {
	rule, ok := Rules[procedure]
	if !ok {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w: %s has no authorization rule", ErrDenied, procedure))
	}
	if rule.ServiceOnly {
		if p.Kind == auth.Service || i.a.super[p.String()] {
			return nil
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w: %s is for the cluster's own processes, not %s", ErrDenied, procedure, p))
	}
	if rule.Actions == nil {
		return nil
	}
	if err := i.a.Authorize(p, rule.Actions(msg)...); err != nil {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return nil
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		p := principalOf(ctx)
		procedure := req.Spec().Procedure
		if err := i.check(procedure, p, req.Any()); err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		if err == nil {
			if f := Rules[procedure].Filter; f != nil {
				f(ctx, func(act Action) bool { return i.a.Allowed(p, act) }, resp.Any())
			}
		}
		return resp, err
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		procedure := conn.Spec().Procedure
		if _, ok := Rules[procedure]; !ok {
			return i.check(procedure, auth.Principal{}, nil)
		}
		return next(ctx, &checkedConn{StreamingHandlerConn: conn, i: i, p: principalOf(ctx)})
	}
}

// checkedConn checks each message a stream handler receives.
type checkedConn struct {
	connect.StreamingHandlerConn
	i interceptor
	p auth.Principal
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if Rules[c.Spec().Procedure].InHandler {
		return nil // the handler calls CheckMessage
	}
	return c.i.check(c.Spec().Procedure, c.p, msg)
}

// CheckMessage is the check of one message of procedure for the caller of
// ctx, for handlers whose rule is InHandler: nil, or PermissionDenied.
func (a *Authorizer) CheckMessage(ctx context.Context, procedure string, msg any) error {
	return interceptor{a: a}.check(procedure, principalOf(ctx), msg)
}

// IsDenied reports whether err is an authorization refusal.
func IsDenied(err error) bool { return errors.Is(err, ErrDenied) }
