package fetch

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/rpcclient"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// Session routing across fetch copies. A session lives on the copy that
// serves its Subscribe stream, but a load balancer may send its unary
// calls (GrantCredits, Commit) to any copy. So a copy with an advertised
// Address puts it into the ids it hands out — "s-<random>.<address>" and
// "m-<random>.<address>", the address in unpadded base64url (ids stay
// within bookkeeping's [a-zA-Z0-9._-]) — and a copy that receives a call for
// a session it does not hold forwards it there, once (forwardedHeader
// stops loops). A Commit whose owner cannot be reached is applied here: it
// is fenced by its lease epochs wherever it is applied; only the session's
// keepalive and its commit-on-revoke release are lost with that copy.

// forwardedHeader marks a call one copy forwarded to another.
const forwardedHeader = "Sluice-Forwarded"

// Forwarder returns a Deps.Forward reaching other copies' ConsumerService
// with the gRPC protocol through p.
func Forwarder(p rpcclient.Peers) func(address string) sluicev1connect.ConsumerServiceClient {
	return func(address string) sluicev1connect.ConsumerServiceClient {
		// No gzip between copies: the payloads are record batches
		// compressed by their producers, or small.
		return sluicev1connect.NewConsumerServiceClient(p.HTTP, p.URL(address), p.Options(connect.WithGRPC(),
			connect.WithAcceptCompression("gzip", nil, nil))...)
	}
}

// routedID returns an id with this copy's address, if it has one.
func (s *Service) routedID(prefix string) string {
	id := newID(prefix)
	if s.cfg.Address == "" {
		return id
	}
	return id + "." + base64.RawURLEncoding.EncodeToString([]byte(s.cfg.Address))
}

// ownerOf returns the address an id names, or "" (no address, or this
// copy's own).
func (s *Service) ownerOf(id string) string {
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(id[i+1:])
	if err != nil || len(b) == 0 || string(b) == s.cfg.Address {
		return ""
	}
	return string(b)
}

// forwardTo says whether a call for id must go to another copy: when the
// id names one, this copy does not hold the session, the call was not
// forwarded already, and forwarding is configured.
func (s *Service) forwardTo(id string, h interface{ Get(string) string }, local bool) string {
	if local || s.d.Forward == nil || h.Get(forwardedHeader) != "" {
		return ""
	}
	return s.ownerOf(id)
}

func (s *Service) forwardGrant(ctx context.Context, addr string, req *connect.Request[sluicev1.GrantCreditsRequest]) (*connect.Response[sluicev1.GrantCreditsResponse], error) {
	fwd := connect.NewRequest(req.Msg)
	fwd.Header().Set(forwardedHeader, "1")
	resp, err := s.d.Forward(addr).GrantCredits(ctx, fwd)
	if err != nil {
		return nil, forwardErr(addr, err)
	}
	return connect.NewResponse(resp.Msg), nil
}

// forwardCommit forwards a member's commit to its session's copy; ok false
// means that copy could not be reached and the commit is to be applied
// here.
func (s *Service) forwardCommit(ctx context.Context, addr string, req *connect.Request[sluicev1.CommitRequest]) (resp *connect.Response[sluicev1.CommitResponse], ok bool, err error) {
	fwd := connect.NewRequest(req.Msg)
	fwd.Header().Set(forwardedHeader, "1")
	r, err := s.d.Forward(addr).Commit(ctx, fwd)
	switch {
	case err == nil:
		return connect.NewResponse(r.Msg), true, nil
	case connect.CodeOf(err) == connect.CodeUnavailable && ctx.Err() == nil:
		return nil, false, nil
	default:
		return nil, true, forwardErr(addr, err)
	}
}

// forwardErr keeps the other copy's answer (code, message, details).
func forwardErr(addr string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("forward to fetch copy %s: %w", addr, err))
}
