package registry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

func newClient(t *testing.T) sluicev1connect.SchemaServiceClient {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	svc, err := New(cat)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return sluicev1connect.NewSchemaServiceClient(srv.Client(), srv.URL)
}

// wantCode fails unless err has the Connect code and Confluent's error
// code in its ErrorInfo.
func wantCode(t *testing.T, err error, code connect.Code, confluent string, what string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonSchemaRegistry && info.GetMetadata()["error_code"] == confluent {
				return
			}
		}
	}
	t.Fatalf("%s: %v carries no ErrorInfo with error_code %s", what, err, confluent)
}

// SchemaService answers from the same registry as the REST API, with
// Connect codes and Confluent's code in each error's ErrorInfo.
func TestSchemaService(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	reg := func(subject, s string) (*sluicev1.SubjectVersion, error) {
		resp, err := c.RegisterSchema(ctx, connect.NewRequest(&sluicev1.RegisterSchemaRequest{Subject: subject, Schema: &sluicev1.SchemaInput{Schema: s}}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetVersion(), nil
	}
	v1, err := reg("orders-value", order1)
	if err != nil || v1.GetVersion() != 1 || v1.GetSchema().GetId() != 1 || v1.GetSchema().GetType() != "AVRO" || v1.GetSchema().GetSchema() != order1 {
		t.Fatalf("register: %v, %v", v1, err)
	}
	_, err = reg("orders-value", orderX)
	wantCode(t, err, connect.CodeFailedPrecondition, "409", "an incompatible schema")
	_, err = reg("orders-value", `{"type":`)
	wantCode(t, err, connect.CodeInvalidArgument, "42201", "a schema that does not parse")
	if _, err := reg("orders-value", order2); err != nil {
		t.Fatal(err)
	}

	got, err := c.GetSchema(ctx, connect.NewRequest(&sluicev1.GetSchemaRequest{Id: 1}))
	if err != nil || got.Msg.GetSchema().GetSchema() != order1 {
		t.Fatalf("GetSchema: %v, %v", got, err)
	}
	_, err = c.GetSchema(ctx, connect.NewRequest(&sluicev1.GetSchemaRequest{Id: 42}))
	wantCode(t, err, connect.CodeNotFound, "40403", "an unknown id")
	latest, err := c.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: "orders-value"}))
	if err != nil || latest.Msg.GetVersion().GetVersion() != 2 {
		t.Fatalf("latest: %v, %v", latest, err)
	}
	_, err = c.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: "nope"}))
	wantCode(t, err, connect.CodeNotFound, "40401", "an unknown subject")
	_, err = c.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: "orders-value", Version: -3}))
	wantCode(t, err, connect.CodeInvalidArgument, "42202", "a negative version")
	found, err := c.LookupSchema(ctx, connect.NewRequest(&sluicev1.LookupSchemaRequest{Subject: "orders-value", Schema: &sluicev1.SchemaInput{Schema: order1}}))
	if err != nil || found.Msg.GetVersion().GetVersion() != 1 {
		t.Fatalf("lookup: %v, %v", found, err)
	}

	check, err := c.CheckCompatibility(ctx, connect.NewRequest(&sluicev1.CheckCompatibilityRequest{Subject: "orders-value", Schema: &sluicev1.SchemaInput{Schema: orderX}}))
	if err != nil || check.Msg.GetCompatible() || len(check.Msg.GetMessages()) != 1 {
		t.Fatalf("check: %v, %v", check, err)
	}
	if _, err := c.SetCompatibility(ctx, connect.NewRequest(&sluicev1.SetCompatibilityRequest{Subject: "orders-value", Level: "none"})); err != nil {
		t.Fatal(err)
	}
	if l, err := c.GetCompatibility(ctx, connect.NewRequest(&sluicev1.GetCompatibilityRequest{Subject: "orders-value"})); err != nil || l.Msg.GetLevel() != "NONE" {
		t.Fatalf("level: %v, %v", l, err)
	}
	_, err = c.SetCompatibility(ctx, connect.NewRequest(&sluicev1.SetCompatibilityRequest{}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("removing the global level: %v", err)
	}

	_, err = c.DeleteVersion(ctx, connect.NewRequest(&sluicev1.DeleteVersionRequest{Subject: "orders-value", Version: 1, Permanent: true}))
	wantCode(t, err, connect.CodeFailedPrecondition, "40407", "a permanent delete first")
	del, err := c.DeleteSubject(ctx, connect.NewRequest(&sluicev1.DeleteSubjectRequest{Subject: "orders-value"}))
	if err != nil || !slices.Equal(del.Msg.GetVersions(), []int32{1, 2}) {
		t.Fatalf("delete subject: %v, %v", del, err)
	}
	subjects, err := c.ListSubjects(ctx, connect.NewRequest(&sluicev1.ListSubjectsRequest{Deleted: true}))
	if err != nil || !slices.Equal(subjects.Msg.GetSubjects(), []string{"orders-value"}) {
		t.Fatalf("subjects with deleted ones: %v, %v", subjects, err)
	}
	vs, err := c.ListVersions(ctx, connect.NewRequest(&sluicev1.ListVersionsRequest{Subject: "orders-value", Deleted: true}))
	if err != nil || !slices.Equal(vs.Msg.GetVersions(), []int32{1, 2}) {
		t.Fatalf("versions with deleted ones: %v, %v", vs, err)
	}
}
