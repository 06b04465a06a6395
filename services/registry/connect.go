package registry

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/schema/registry"
)

// ReasonSchemaRegistry is the ErrorInfo reason of the SchemaService's
// errors; their metadata error_code is Confluent's error code.
const ReasonSchemaRegistry = "SCHEMA_REGISTRY"

// Service is sluice.v1.SchemaService over a registry.
type Service struct{ r *registry.Registry }

var _ sluicev1connect.SchemaServiceHandler = (*Service)(nil)

// New builds the registry over store and returns its service.
func New(store catalog.Schemas) (*Service, error) {
	r, err := registry.New(registry.Config{Store: store})
	if err != nil {
		return nil, err
	}
	return &Service{r: r}, nil
}

// REST returns the registry's REST API (mount it at RESTPrefix).
func (s *Service) REST() http.Handler { return REST(s.r) }

// Handler returns the service's path and handler.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return sluicev1connect.NewSchemaServiceHandler(s, opts...)
}

// connectErr maps a registry error to a Connect code, with Confluent's
// code in the ErrorInfo.
func connectErr(err error) error {
	var e *registry.Error
	if !errors.As(err, &e) {
		return apierr.Otherwise(err)
	}
	code := connect.CodeInternal
	switch e.HTTPStatus() {
	case 404:
		code = connect.CodeNotFound
		if e.Code == registry.CodeVersionNotSoftDeleted || e.Code == registry.CodeSubjectNotSoftDeleted || e.Code == registry.CodeSubjectSoftDeleted {
			code = connect.CodeFailedPrecondition
		}
	case 409:
		code = connect.CodeFailedPrecondition
	case 422, 400:
		code = connect.CodeInvalidArgument
	}
	if e.Code == registry.CodeBackendError {
		code = connect.CodeUnavailable
	}
	return apierr.WithReason(connect.NewError(code, errors.New(e.Message)), ReasonSchemaRegistry, map[string]string{"error_code": strconv.Itoa(e.Code)})
}

func inputOf(in *sluicev1.SchemaInput) registry.Input {
	out := registry.Input{Type: in.GetType(), Schema: in.GetSchema()}
	for _, r := range in.GetReferences() {
		out.References = append(out.References, catalog.SchemaReference{Name: r.GetName(), Subject: r.GetSubject(), Version: int(r.GetVersion())})
	}
	return out
}

func refsPB(refs []catalog.SchemaReference) []*sluicev1.SchemaReference {
	var out []*sluicev1.SchemaReference
	for _, r := range refs {
		out = append(out, &sluicev1.SchemaReference{Name: r.Name, Subject: r.Subject, Version: int32(r.Version)})
	}
	return out
}

func versionPB(v registry.Version) *sluicev1.SubjectVersion {
	return &sluicev1.SubjectVersion{Subject: v.Subject, Version: int32(v.Version), Deleted: v.Deleted,
		Schema: &sluicev1.SchemaInfo{Id: v.ID, Type: v.Type, Schema: v.Schema, References: refsPB(v.References)}}
}

// version maps the API's version (0: latest) to the registry's.
func version(v int32) (int, error) {
	switch {
	case v == 0:
		return registry.LatestVersion, nil
	case v < 0:
		return 0, connectErr(&registry.Error{Code: registry.CodeInvalidVersion, Message: "version " + strconv.Itoa(int(v)) + " is not a version (1 and up, or 0 for the latest)"})
	}
	return int(v), nil
}

func (s *Service) RegisterSchema(ctx context.Context, req *connect.Request[sluicev1.RegisterSchemaRequest]) (*connect.Response[sluicev1.RegisterSchemaResponse], error) {
	v, err := s.r.Register(ctx, req.Msg.GetSubject(), inputOf(req.Msg.GetSchema()))
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.RegisterSchemaResponse{Version: versionPB(v)}), nil
}

func (s *Service) LookupSchema(ctx context.Context, req *connect.Request[sluicev1.LookupSchemaRequest]) (*connect.Response[sluicev1.LookupSchemaResponse], error) {
	v, err := s.r.Lookup(ctx, req.Msg.GetSubject(), inputOf(req.Msg.GetSchema()), req.Msg.GetDeleted())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.LookupSchemaResponse{Version: versionPB(v)}), nil
}

func (s *Service) GetSchema(ctx context.Context, req *connect.Request[sluicev1.GetSchemaRequest]) (*connect.Response[sluicev1.GetSchemaResponse], error) {
	rec, err := s.r.Schema(ctx, req.Msg.GetId())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.GetSchemaResponse{Schema: &sluicev1.SchemaInfo{Id: rec.ID, Type: rec.Format, Schema: rec.Schema, References: refsPB(rec.References)}}), nil
}

func (s *Service) GetSubjectVersion(ctx context.Context, req *connect.Request[sluicev1.GetSubjectVersionRequest]) (*connect.Response[sluicev1.GetSubjectVersionResponse], error) {
	n, err := version(req.Msg.GetVersion())
	if err != nil {
		return nil, err
	}
	v, err := s.r.Version(ctx, req.Msg.GetSubject(), n, req.Msg.GetDeleted())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.GetSubjectVersionResponse{Version: versionPB(v)}), nil
}

func (s *Service) ListSubjects(ctx context.Context, req *connect.Request[sluicev1.ListSubjectsRequest]) (*connect.Response[sluicev1.ListSubjectsResponse], error) {
	subjects, err := s.r.Subjects(ctx, req.Msg.GetDeleted())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.ListSubjectsResponse{Subjects: subjects}), nil
}

func int32s(vs []int) []int32 {
	out := make([]int32, len(vs))
	for i, v := range vs {
		out[i] = int32(v)
	}
	return out
}

func (s *Service) ListVersions(ctx context.Context, req *connect.Request[sluicev1.ListVersionsRequest]) (*connect.Response[sluicev1.ListVersionsResponse], error) {
	vs, err := s.r.Versions(ctx, req.Msg.GetSubject(), req.Msg.GetDeleted())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.ListVersionsResponse{Versions: int32s(vs)}), nil
}

func (s *Service) DeleteSubject(ctx context.Context, req *connect.Request[sluicev1.DeleteSubjectRequest]) (*connect.Response[sluicev1.DeleteSubjectResponse], error) {
	vs, err := s.r.DeleteSubject(ctx, req.Msg.GetSubject(), req.Msg.GetPermanent())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.DeleteSubjectResponse{Versions: int32s(vs)}), nil
}

func (s *Service) DeleteVersion(ctx context.Context, req *connect.Request[sluicev1.DeleteVersionRequest]) (*connect.Response[sluicev1.DeleteVersionResponse], error) {
	n, err := version(req.Msg.GetVersion())
	if err != nil {
		return nil, err
	}
	v, err := s.r.DeleteVersion(ctx, req.Msg.GetSubject(), n, req.Msg.GetPermanent())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.DeleteVersionResponse{Version: int32(v)}), nil
}

func (s *Service) GetCompatibility(ctx context.Context, req *connect.Request[sluicev1.GetCompatibilityRequest]) (*connect.Response[sluicev1.GetCompatibilityResponse], error) {
	l, err := s.r.Compatibility(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.GetCompatibilityResponse{Level: string(l)}), nil
}

func (s *Service) SetCompatibility(ctx context.Context, req *connect.Request[sluicev1.SetCompatibilityRequest]) (*connect.Response[sluicev1.SetCompatibilityResponse], error) {
	if req.Msg.GetSubject() == "" && req.Msg.GetLevel() == "" {
		return nil, apierr.Invalid("level", "required for the global level (it cannot be removed)")
	}
	l, err := s.r.SetCompatibility(ctx, req.Msg.GetSubject(), req.Msg.GetLevel())
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.SetCompatibilityResponse{Level: string(l)}), nil
}

func (s *Service) CheckCompatibility(ctx context.Context, req *connect.Request[sluicev1.CheckCompatibilityRequest]) (*connect.Response[sluicev1.CheckCompatibilityResponse], error) {
	n, err := version(req.Msg.GetVersion())
	if err != nil {
		return nil, err
	}
	msgs, err := s.r.CheckCompatibility(ctx, req.Msg.GetSubject(), n, req.Msg.GetAllVersions(), inputOf(req.Msg.GetSchema()))
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&sluicev1.CheckCompatibilityResponse{Compatible: len(msgs) == 0, Messages: msgs}), nil
}
