package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// triggerClients serves the admin service over a real h2c server on an
// embedded catalog with topic "orders", and returns a Connect and a gRPC
// client of it.
func triggerClients(t *testing.T) map[string]sluicev1connect.AdminServiceClient {
	t.Helper()
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	if _, err := cat.CreateTopic(t.Context(), "orders", 2, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	s, err := New(Deps{Catalog: cat, Ledgers: noRecovery{t}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(s.Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &cp}}
	return map[string]sluicev1connect.AdminServiceClient{
		"connect": sluicev1connect.NewAdminServiceClient(srv.Client(), srv.URL),
		"grpc":    sluicev1connect.NewAdminServiceClient(h2c, srv.URL, connect.WithGRPC()),
	}
}

func TestTriggerRPCs(t *testing.T) {
	for proto, c := range triggerClients(t) {
		t.Run(proto, func(t *testing.T) { testTriggerRPCs(t, t.Context(), c, proto) })
	}
}

func testTriggerRPCs(t *testing.T, ctx context.Context, c sluicev1connect.AdminServiceClient, name string) {
	spec := &sluicev1.TriggerSpec{Topic: "orders", Function: "arn:aws:lambda:us-east-1:123456789012:function:handler", Enabled: true,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST, BatchSize: 50,
		Parallelization: 2, BisectOnError: true, OnFailureTopic: "orders-dlq"}
	created, err := c.CreateTrigger(ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name, Spec: spec}))
	if err != nil {
		t.Fatalf("CreateTrigger: %v", err)
	}
	info := created.Msg.GetTrigger()
	got := info.GetSpec()
	if info.GetName() != name || info.GetVersion() != 1 || info.GetTopicId() == "" || info.GetCreatedAtMs() == 0 ||
		got.GetBatchSize() != 50 || got.GetParallelization() != 2 || !got.GetBisectOnError() || got.GetOnFailureTopic() != "orders-dlq" ||
		got.GetStartingPosition() != sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST {
		t.Fatalf("CreateTrigger = %v", info)
	}
	// Defaults are shown resolved.
	if got.GetMaxBatchBytes() != catalog.MaxTriggerBatchBytes || got.GetMaxRetries() != 3 || got.GetRetryBackoffInitialMs() != 100 || got.GetRetryBackoffMaxMs() != 30_000 {
		t.Fatalf("defaults not resolved: %v", got)
	}
	// Create answers the stored state only; the runtime state is
	// DescribeTrigger's.
	if info.GetState() != sluicev1.TriggerState_TRIGGER_STATE_UNSPECIFIED || !strings.Contains(info.GetStateMessage(), "enabled") {
		t.Fatalf("state = %v %q", info.GetState(), info.GetStateMessage())
	}

	_, err = c.CreateTrigger(ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name, Spec: spec}))
	wantCode(t, err, connect.CodeAlreadyExists, "second CreateTrigger")
	_, err = c.CreateTrigger(ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name + "-x", Spec: &sluicev1.TriggerSpec{Topic: "missing", Function: "f"}}))
	wantCode(t, err, connect.CodeNotFound, "CreateTrigger on a missing topic")

	desc, err := c.DescribeTrigger(ctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: name}))
	if err != nil || desc.Msg.GetTrigger().GetVersion() != 1 || desc.Msg.GetTrigger().GetSpec().GetFunction() != spec.GetFunction() {
		t.Fatalf("DescribeTrigger = %v, %v", desc.Msg.GetTrigger(), err)
	}
	_, err = c.DescribeTrigger(ctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: "nope"}))
	wantCode(t, err, connect.CodeNotFound, "DescribeTrigger of a missing trigger")

	// Update: disable it; a stale version is FAILED_PRECONDITION.
	off := &sluicev1.TriggerSpec{Topic: "orders", Function: "handler"}
	up, err := c.UpdateTrigger(ctx, connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: name, Spec: off, ExpectedVersion: 1}))
	if err != nil || up.Msg.GetTrigger().GetVersion() != 2 || up.Msg.GetTrigger().GetState() != sluicev1.TriggerState_TRIGGER_STATE_DISABLED ||
		up.Msg.GetTrigger().GetSpec().GetStartingPosition() != sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_LATEST {
		t.Fatalf("UpdateTrigger = %v, %v", up.Msg.GetTrigger(), err)
	}
	_, err = c.UpdateTrigger(ctx, connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: name, Spec: off, ExpectedVersion: 1}))
	wantCode(t, err, connect.CodeFailedPrecondition, "UpdateTrigger at a stale version")
	_, err = c.UpdateTrigger(ctx, connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: name, Spec: off}))
	wantInvalid(t, err, "UpdateTrigger without a version", "expected_version")
	_, err = c.UpdateTrigger(ctx, connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: "nope", Spec: off, ExpectedVersion: 1}))
	wantCode(t, err, connect.CodeNotFound, "UpdateTrigger of a missing trigger")

	list, err := c.ListTriggers(ctx, connect.NewRequest(&sluicev1.ListTriggersRequest{}))
	if err != nil || len(list.Msg.GetTriggers()) == 0 {
		t.Fatalf("ListTriggers = %v, %v", list.Msg.GetTriggers(), err)
	}
	_, err = c.ListTriggers(ctx, connect.NewRequest(&sluicev1.ListTriggersRequest{PageSize: -1}))
	wantInvalid(t, err, "ListTriggers(page size -1)", "limit")

	if _, err := c.DeleteTrigger(ctx, connect.NewRequest(&sluicev1.DeleteTriggerRequest{Name: name})); err != nil {
		t.Fatalf("DeleteTrigger: %v", err)
	}
	_, err = c.DeleteTrigger(ctx, connect.NewRequest(&sluicev1.DeleteTriggerRequest{Name: name}))
	wantCode(t, err, connect.CodeNotFound, "second DeleteTrigger")
}

// TestTriggerValidationMessages: every bad field is named in one
// INVALID_ARGUMENT.
func TestTriggerValidationMessages(t *testing.T) {
	c := triggerClients(t)["connect"]
	_, err := c.CreateTrigger(t.Context(), connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: "bad name", Spec: &sluicev1.TriggerSpec{
		Topic: "orders", Function: "not a function", BatchSize: 20_000, MaxBatchBytes: 7 << 20, Parallelization: 11,
		MaxRecordAgeMs: 5, OnFailureTopic: "orders",
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_TIMESTAMP,
	}}))
	for _, field := range []string{"name", "function", "batch_size", "max_batch_bytes", "parallelization", "max_record_age_ms", "on_failure_topic", "starting_timestamp_ms"} {
		wantInvalid(t, err, "CreateTrigger with bad fields", field)
	}
	for _, want := range []string{"6291456", "Lambda function name", "[1, 10000]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	_, err = c.CreateTrigger(t.Context(), connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: "t", Spec: &sluicev1.TriggerSpec{
		Topic: "orders", Function: "f", StartingPosition: 9}}))
	wantInvalid(t, err, "unknown starting position", "starting_position")
	_, err = c.CreateTrigger(t.Context(), connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: "t"}))
	wantInvalid(t, err, "CreateTrigger without a spec", "topic")
}

func wantCode(t *testing.T, err error, code connect.Code, what string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("%s: err = %v, want %v", what, err, code)
	}
}

// wantInvalid fails unless err is INVALID_ARGUMENT and its message names
// field (the catalog's "invalid FIELD:" or apierr's "FIELD:").
func wantInvalid(t *testing.T, err error, what, field string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("%s: err = %v, want INVALID_ARGUMENT", what, err)
	}
	if !strings.Contains(ce.Message(), "invalid "+field+":") && !strings.HasPrefix(ce.Message(), field+":") {
		t.Fatalf("%s: message does not name %s:\n%s", what, field, ce.Message())
	}
}

// A trigger created or updated by an authenticated user runs as that
// user; one made by the cluster's own processes, or without
// authentication, runs as no one in particular.
func TestTriggerRunAsIsTheCaller(t *testing.T) {
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	if _, err := cat.CreateTopic(t.Context(), "orders", 1, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	s, err := New(Deps{Catalog: cat, Ledgers: noRecovery{t}})
	if err != nil {
		t.Fatal(err)
	}
	as := func(p auth.Principal) context.Context { return auth.WithPrincipal(t.Context(), p) }
	alice, bob := auth.Principal{Kind: auth.User, Name: "alice"}, auth.Principal{Kind: auth.User, Name: "bob"}
	spec := &sluicev1.TriggerSpec{Topic: "orders", Function: "fn"}
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{
		{as(alice), "User:alice"},
		{as(auth.Principal{Kind: auth.Service, Name: "fetch-1"}), ""},
		{t.Context(), ""},
	} {
		resp, err := s.CreateTrigger(c.ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: "t", Spec: spec}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Msg.GetTrigger().GetRunAs(); got != c.want {
			t.Fatalf("TriggerInfo.run_as %q; want %q", got, c.want)
		}
		tr, err := cat.GetTrigger(t.Context(), "t")
		if err != nil || tr.RunAs != c.want {
			t.Fatalf("RunAs %q, %v; want %q", tr.RunAs, err, c.want)
		}
		if c.want != "" {
			if _, err := s.UpdateTrigger(as(bob), connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: "t", Spec: spec, ExpectedVersion: tr.Version})); err != nil {
				t.Fatal(err)
			}
			if tr, _ := cat.GetTrigger(t.Context(), "t"); tr.RunAs != "User:bob" {
				t.Fatalf("after bob's update RunAs %q; want User:bob", tr.RunAs)
			}
		}
		if _, err := cat.DeleteTrigger(t.Context(), "t"); err != nil {
			t.Fatal(err)
		}
	}
}
