package admin

import (
	"context"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// The trigger RPCs store and read triggers (catalog.Triggers); the fetch
// service runs them (services/fetch/triggers.go) and reports their
// runtime state through Deps.TriggerStatus, which DescribeTrigger asks.
// The other RPCs show the stored state only (enabled or disabled): the
// runtime state costs a group listing and a lag lookup per partition.

// enabledMessage is the state message of an enabled trigger where the
// runtime state is not looked up.
const enabledMessage = "enabled (DescribeTrigger shows whether it runs)"

// CreateTrigger stores a trigger on an existing topic.
func (s *Service) CreateTrigger(ctx context.Context, req *connect.Request[sluicev1.CreateTriggerRequest]) (*connect.Response[sluicev1.CreateTriggerResponse], error) {
	spec, err := triggerSpec(req.Msg.GetSpec())
	if err != nil {
		return nil, err
	}
	spec.RunAs = runAs(ctx)
	tr, err := s.d.Catalog.CreateTrigger(ctx, req.Msg.GetName(), spec)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	return connect.NewResponse(&sluicev1.CreateTriggerResponse{Trigger: triggerInfo(tr)}), nil
}

// UpdateTrigger replaces a trigger's spec by compare-and-set on its version.
func (s *Service) UpdateTrigger(ctx context.Context, req *connect.Request[sluicev1.UpdateTriggerRequest]) (*connect.Response[sluicev1.UpdateTriggerResponse], error) {
	if v := req.Msg.GetExpectedVersion(); v < 1 {
		return nil, apierr.Invalid("expected_version", "is %d; pass the version read (TriggerInfo.version, at least 1)", v)
	}
	spec, err := triggerSpec(req.Msg.GetSpec())
	if err != nil {
		return nil, err
	}
	spec.RunAs = runAs(ctx)
	tr, err := s.d.Catalog.UpdateTrigger(ctx, req.Msg.GetName(), spec, req.Msg.GetExpectedVersion())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	return connect.NewResponse(&sluicev1.UpdateTriggerResponse{Trigger: triggerInfo(tr)}), nil
}

// DeleteTrigger removes a trigger.
func (s *Service) DeleteTrigger(ctx context.Context, req *connect.Request[sluicev1.DeleteTriggerRequest]) (*connect.Response[sluicev1.DeleteTriggerResponse], error) {
	if _, err := s.d.Catalog.DeleteTrigger(ctx, req.Msg.GetName()); err != nil {
		return nil, apierr.FromCatalog(err)
	}
	return connect.NewResponse(&sluicev1.DeleteTriggerResponse{}), nil
}

// ListTriggers lists triggers in name order.
func (s *Service) ListTriggers(ctx context.Context, req *connect.Request[sluicev1.ListTriggersRequest]) (*connect.Response[sluicev1.ListTriggersResponse], error) {
	page, err := s.d.Catalog.ListTriggers(ctx, req.Msg.GetPageToken(), int(req.Msg.GetPageSize()))
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	resp := &sluicev1.ListTriggersResponse{NextPageToken: page.NextPageToken}
	for _, tr := range page.Items {
		resp.Triggers = append(resp.Triggers, triggerInfo(tr))
	}
	return connect.NewResponse(resp), nil
}

// DescribeTrigger returns a trigger and its state.
func (s *Service) DescribeTrigger(ctx context.Context, req *connect.Request[sluicev1.DescribeTriggerRequest]) (*connect.Response[sluicev1.DescribeTriggerResponse], error) {
	tr, err := s.d.Catalog.GetTrigger(ctx, req.Msg.GetName())
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	info := triggerInfo(tr)
	if s.d.TriggerStatus == nil {
		if tr.Enabled {
			info.StateMessage = "enabled; this admin endpoint has no consumer side to report the runtime state: ask a fetch copy's"
		}
		return connect.NewResponse(&sluicev1.DescribeTriggerResponse{Trigger: info}), nil
	}
	st, err := s.d.TriggerStatus(ctx, tr)
	if err != nil {
		return nil, err
	}
	info.State, info.StateMessage = st.GetTrigger().GetState(), st.GetTrigger().GetStateMessage()
	st.Trigger = info
	return connect.NewResponse(st), nil
}

var startingPositions = map[sluicev1.TriggerStartingPosition]catalog.StartingPosition{
	sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_UNSPECIFIED: "",
	sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST:    catalog.StartEarliest,
	sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_LATEST:      catalog.StartLatest,
	sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_TIMESTAMP:   catalog.StartTimestamp,
}

// triggerSpec converts the API's spec; the catalog validates the values.
func triggerSpec(m *sluicev1.TriggerSpec) (catalog.TriggerSpec, error) {
	pos, ok := startingPositions[m.GetStartingPosition()]
	if !ok {
		return catalog.TriggerSpec{}, apierr.Invalid("starting_position", "%d is not a TriggerStartingPosition", m.GetStartingPosition())
	}
	return catalog.TriggerSpec{
		Topic: m.GetTopic(), Function: m.GetFunction(), Enabled: m.GetEnabled(),
		StartingPosition: pos, StartingTimestampMs: m.GetStartingTimestampMs(),
		BatchSize: int(m.GetBatchSize()), MaxBatchBytes: int(m.GetMaxBatchBytes()), BatchWindowMs: m.GetBatchWindowMs(),
		Parallelization: int(m.GetParallelization()), MaxRetries: int(m.GetMaxRetries()),
		RetryBackoffInitialMs: m.GetRetryBackoffInitialMs(), RetryBackoffMaxMs: m.GetRetryBackoffMaxMs(),
		MaxRecordAgeMs: m.GetMaxRecordAgeMs(), BisectOnError: m.GetBisectOnError(), OnFailureTopic: m.GetOnFailureTopic(), ReadUncommitted: m.GetReadUncommitted(),
	}, nil
}

// runAs is the principal a trigger created or updated by the caller of
// ctx runs as: the caller's ("" without authentication). Service
// principals (another copy forwarding) and super-users get no check.
func runAs(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok && p.Kind == auth.User {
		return p.String()
	}
	return ""
}

func triggerInfo(tr catalog.Trigger) *sluicev1.TriggerInfo {
	var pos sluicev1.TriggerStartingPosition
	for p, c := range startingPositions {
		if c == tr.StartingPosition {
			pos = p
		}
	}
	info := &sluicev1.TriggerInfo{
		Name: tr.Name, TopicId: string(tr.TopicID), Version: tr.Version,
		CreatedAtMs: tr.CreatedAt.UnixMilli(), UpdatedAtMs: tr.UpdatedAt.UnixMilli(),
		Spec: &sluicev1.TriggerSpec{
			Topic: tr.Topic, Function: tr.Function, Enabled: tr.Enabled,
			StartingPosition: pos, StartingTimestampMs: tr.StartingTimestampMs,
			BatchSize: int32(tr.BatchSize), MaxBatchBytes: int32(tr.MaxBatchBytes), BatchWindowMs: tr.BatchWindowMs,
			Parallelization: int32(tr.Parallelization), MaxRetries: int32(tr.MaxRetries),
			RetryBackoffInitialMs: tr.RetryBackoffInitialMs, RetryBackoffMaxMs: tr.RetryBackoffMaxMs,
			MaxRecordAgeMs: tr.MaxRecordAgeMs, BisectOnError: tr.BisectOnError, OnFailureTopic: tr.OnFailureTopic, ReadUncommitted: tr.ReadUncommitted,
		},
		StateMessage: enabledMessage,
		RunAs:        tr.RunAs,
	}
	if !tr.Enabled {
		info.State, info.StateMessage = sluicev1.TriggerState_TRIGGER_STATE_DISABLED, "disabled: stored, not run"
	}
	return info
}
