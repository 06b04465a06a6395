package admin

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// The ACL RPCs (docs/DESIGN.md §2.12): the catalog stores the rules; the
// authorizer of every copy reads them (this copy's at once, after a
// change).

var errNoACLs = connect.NewError(connect.CodeUnimplemented, errors.New("this server keeps no ACLs"))

func aclOf(a *sluicev1.Acl) catalog.ACL {
	return catalog.ACL{Principal: a.GetPrincipal(), ResourceType: catalog.ResourceType(a.GetResourceType()), PatternType: catalog.PatternType(a.GetPatternType()),
		ResourceName: a.GetResourceName(), Operation: catalog.Operation(a.GetOperation()), Permission: catalog.Permission(a.GetPermission())}
}

func aclMsg(a catalog.ACL) *sluicev1.Acl {
	return &sluicev1.Acl{Principal: a.Principal, ResourceType: string(a.ResourceType), PatternType: string(a.PatternType),
		ResourceName: a.ResourceName, Operation: string(a.Operation), Permission: string(a.Permission)}
}

func filterOf(f *sluicev1.AclFilter) catalog.ACLFilter {
	return catalog.ACLFilter{Principal: f.GetPrincipal(), ResourceType: catalog.ResourceType(f.GetResourceType()), PatternType: catalog.PatternType(f.GetPatternType()),
		ResourceName: f.GetResourceName(), Operation: catalog.Operation(f.GetOperation()), Permission: catalog.Permission(f.GetPermission())}
}

func aclMsgs(acls []catalog.ACL) []*sluicev1.Acl {
	out := make([]*sluicev1.Acl, len(acls))
	for i, a := range acls {
		out[i] = aclMsg(a)
	}
	return out
}

func (s *Service) aclsChanged(ctx context.Context) {
	if s.d.ACLsChanged != nil {
		s.d.ACLsChanged(ctx)
	}
}

// CreateAcls adds access rules.
func (s *Service) CreateAcls(ctx context.Context, req *connect.Request[sluicev1.CreateAclsRequest]) (*connect.Response[sluicev1.CreateAclsResponse], error) {
	if s.d.ACLs == nil {
		return nil, errNoACLs
	}
	acls := make([]catalog.ACL, len(req.Msg.GetAcls()))
	for i, a := range req.Msg.GetAcls() {
		acls[i] = aclOf(a)
	}
	if err := s.d.ACLs.CreateACLs(ctx, acls); err != nil {
		if errors.Is(err, catalog.ErrLimitExceeded) {
			return nil, connect.NewError(connect.CodeFailedPrecondition, err) // not retryable: remove rules first
		}
		return nil, apierr.FromCatalog(err)
	}
	s.aclsChanged(ctx)
	return connect.NewResponse(&sluicev1.CreateAclsResponse{}), nil
}

// DeleteAcls removes the rules a filter selects.
func (s *Service) DeleteAcls(ctx context.Context, req *connect.Request[sluicev1.DeleteAclsRequest]) (*connect.Response[sluicev1.DeleteAclsResponse], error) {
	if s.d.ACLs == nil {
		return nil, errNoACLs
	}
	f := filterOf(req.Msg.GetFilter())
	if f == (catalog.ACLFilter{}) && !req.Msg.GetAll() {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an empty filter removes every ACL: set all to mean it"))
	}
	gone, err := s.d.ACLs.DeleteACLs(ctx, f)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	s.aclsChanged(ctx)
	return connect.NewResponse(&sluicev1.DeleteAclsResponse{Acls: aclMsgs(gone)}), nil
}

// ListAcls lists the rules a filter selects.
func (s *Service) ListAcls(ctx context.Context, req *connect.Request[sluicev1.ListAclsRequest]) (*connect.Response[sluicev1.ListAclsResponse], error) {
	if s.d.ACLs == nil {
		return nil, errNoACLs
	}
	acls, err := s.d.ACLs.ListACLs(ctx, filterOf(req.Msg.GetFilter()))
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	return connect.NewResponse(&sluicev1.ListAclsResponse{Acls: aclMsgs(acls)}), nil
}
