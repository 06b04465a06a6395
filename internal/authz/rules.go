package authz

import (
	"context"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// Rule is what one procedure needs.
type Rule struct {
	// Actions are the actions a request message needs (for a stream, each
	// message); nil needs authentication only.
	Actions func(msg any) []Action
	// ServiceOnly admits the cluster's own processes and super-users only
	// (the peer RPCs between copies).
	ServiceOnly bool
	// Filter, if set, removes from a list answer what the caller may not
	// describe (instead of refusing the list).
	Filter func(ctx context.Context, allowed func(Action) bool, resp any)
	// InHandler leaves the check of each stream message to the handler
	// (Authorizer.CheckMessage), which answers a refused one in the stream
	// and goes on: ProduceStream's per-request errors, which producers
	// take as final for that batch, where a broken stream would be retried.
	InHandler bool
}

func on(op catalog.Operation, rt catalog.ResourceType, name string) Action {
	return Action{Op: op, Type: rt, Name: name}
}

func cluster(op catalog.Operation) Action {
	return on(op, catalog.ResourceCluster, catalog.ClusterName)
}

// one builds a Rule from a typed function of the request message.
func one[T any](f func(*T) []Action) Rule {
	return Rule{Actions: func(msg any) []Action {
		m, ok := msg.(*T)
		if !ok {
			return []Action{cluster(catalog.OpAdmin)} // an unexpected message: only the mighty
		}
		return f(m)
	}}
}

// subjectOr is an action on a schema subject, or on the cluster for the
// global config (an empty subject).
func subjectOr(op catalog.Operation, subject string) Action {
	if subject == "" {
		return cluster(op)
	}
	return on(op, catalog.ResourceSubject, subject)
}

// Rules is every procedure the public servers serve and what it needs.
// The matrix test walks it; a procedure missing here is refused.
var Rules = map[string]Rule{
	// AdminService: topics.
	sluicev1connect.AdminServiceCreateTopicProcedure: one(func(m *sluicev1.CreateTopicRequest) []Action {
		return []Action{on(catalog.OpCreate, catalog.ResourceTopic, m.GetName())}
	}),
	sluicev1connect.AdminServiceDeleteTopicProcedure: one(func(m *sluicev1.DeleteTopicRequest) []Action {
		return []Action{on(catalog.OpDelete, catalog.ResourceTopic, m.GetName())}
	}),
	sluicev1connect.AdminServiceDescribeTopicProcedure: one(func(m *sluicev1.DescribeTopicRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceTopic, m.GetName())}
	}),
	sluicev1connect.AdminServiceListTopicsProcedure: {Filter: func(_ context.Context, allowed func(Action) bool, resp any) {
		if r, ok := resp.(*sluicev1.ListTopicsResponse); ok {
			r.Topics = keep(r.Topics, func(t *sluicev1.TopicInfo) bool {
				return allowed(on(catalog.OpDescribe, catalog.ResourceTopic, t.GetName()))
			})
		}
	}},
	// AdminService: groups.
	sluicev1connect.AdminServiceListGroupsProcedure: {Filter: func(_ context.Context, allowed func(Action) bool, resp any) {
		if r, ok := resp.(*sluicev1.ListGroupsResponse); ok {
			r.Groups = keep(r.Groups, func(g string) bool { return allowed(on(catalog.OpDescribe, catalog.ResourceGroup, g)) })
		}
	}},
	sluicev1connect.AdminServiceDescribeGroupProcedure: one(func(m *sluicev1.DescribeGroupRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceGroup, m.GetGroup())}
	}),
	sluicev1connect.AdminServiceResetGroupOffsetsProcedure: one(func(m *sluicev1.ResetGroupOffsetsRequest) []Action {
		return []Action{on(catalog.OpCommit, catalog.ResourceGroup, m.GetGroup()), on(catalog.OpDescribe, catalog.ResourceTopic, m.GetTopic())}
	}),
	// AdminService: triggers. A trigger reads its topic and may write its
	// on-failure topic: whoever makes it must be allowed both.
	sluicev1connect.AdminServiceCreateTriggerProcedure: one(func(m *sluicev1.CreateTriggerRequest) []Action {
		return append([]Action{on(catalog.OpCreate, catalog.ResourceTrigger, m.GetName())}, triggerTopics(m.GetSpec())...)
	}),
	sluicev1connect.AdminServiceUpdateTriggerProcedure: one(func(m *sluicev1.UpdateTriggerRequest) []Action {
		return append([]Action{on(catalog.OpAlter, catalog.ResourceTrigger, m.GetName())}, triggerTopics(m.GetSpec())...)
	}),
	sluicev1connect.AdminServiceDeleteTriggerProcedure: one(func(m *sluicev1.DeleteTriggerRequest) []Action {
		return []Action{on(catalog.OpDelete, catalog.ResourceTrigger, m.GetName())}
	}),
	sluicev1connect.AdminServiceDescribeTriggerProcedure: one(func(m *sluicev1.DescribeTriggerRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceTrigger, m.GetName())}
	}),
	sluicev1connect.AdminServiceListTriggersProcedure: {Filter: func(_ context.Context, allowed func(Action) bool, resp any) {
		if r, ok := resp.(*sluicev1.ListTriggersResponse); ok {
			r.Triggers = keep(r.Triggers, func(t *sluicev1.TriggerInfo) bool {
				return allowed(on(catalog.OpDescribe, catalog.ResourceTrigger, t.GetName()))
			})
		}
	}},
	// AdminService: the cluster.
	sluicev1connect.AdminServiceListUnderReplicatedLedgersProcedure: {Actions: func(any) []Action { return []Action{cluster(catalog.OpDescribe)} }},
	sluicev1connect.AdminServiceListBookiesProcedure:                {Actions: func(any) []Action { return []Action{cluster(catalog.OpDescribe)} }},
	sluicev1connect.AdminServiceDecommissionBookieProcedure:         {Actions: func(any) []Action { return []Action{cluster(catalog.OpAdmin)} }},
	sluicev1connect.AdminServiceCreateAclsProcedure:                 {Actions: func(any) []Action { return []Action{cluster(catalog.OpAlter)} }},
	sluicev1connect.AdminServiceDeleteAclsProcedure:                 {Actions: func(any) []Action { return []Action{cluster(catalog.OpAlter)} }},
	sluicev1connect.AdminServiceListAclsProcedure:                   {Actions: func(any) []Action { return []Action{cluster(catalog.OpDescribe)} }},

	// ConsumerService.
	sluicev1connect.ConsumerServiceFetchProcedure: one(func(m *sluicev1.FetchRequest) []Action {
		return []Action{on(catalog.OpConsume, catalog.ResourceTopic, m.GetTopic())}
	}),
	sluicev1connect.ConsumerServiceSubscribeProcedure: one(func(m *sluicev1.SubscribeRequest) []Action {
		acts := []Action{on(catalog.OpConsume, catalog.ResourceGroup, m.GetGroup())}
		for _, t := range m.GetTopics() {
			acts = append(acts, on(catalog.OpConsume, catalog.ResourceTopic, t))
		}
		return acts
	}),
	sluicev1connect.ConsumerServiceGrantCreditsProcedure: one(func(m *sluicev1.GrantCreditsRequest) []Action {
		return []Action{on(catalog.OpConsume, catalog.ResourceGroup, m.GetGroup())}
	}),
	sluicev1connect.ConsumerServiceCommitProcedure: one(func(m *sluicev1.CommitRequest) []Action {
		acts := []Action{on(catalog.OpCommit, catalog.ResourceGroup, m.GetGroup())}
		for _, o := range m.GetOffsets() {
			acts = append(acts, on(catalog.OpConsume, catalog.ResourceTopic, o.GetTopic()))
		}
		return acts
	}),
	sluicev1connect.ConsumerServiceLeaveProcedure: one(func(m *sluicev1.LeaveRequest) []Action {
		return []Action{on(catalog.OpConsume, catalog.ResourceGroup, m.GetGroup())}
	}),

	// ProducerService.
	sluicev1connect.ProducerServiceProduceProcedure: one(func(m *sluicev1.ProduceRequest) []Action {
		return []Action{on(catalog.OpProduce, catalog.ResourceTopic, m.GetTopic())}
	}),
	sluicev1connect.ProducerServiceProduceStreamProcedure: inHandler(one(func(m *sluicev1.ProduceStreamRequest) []Action {
		acts := []Action{on(catalog.OpProduce, catalog.ResourceTopic, m.GetRequest().GetTopic())}
		if id := m.GetTransactionalId(); id != "" {
			acts = append(acts, on(catalog.OpProduce, catalog.ResourceTransactionalID, id))
		}
		return acts
	})),
	sluicev1connect.ProducerServiceInitProducerProcedure: one(func(m *sluicev1.InitProducerRequest) []Action {
		if id := m.GetTransactionalId(); id != "" {
			return []Action{on(catalog.OpProduce, catalog.ResourceTransactionalID, id)}
		}
		return nil // an idempotent producer id: anyone authenticated
	}),
	sluicev1connect.ProducerServiceAddPartitionsToTxnProcedure: one(func(m *sluicev1.AddPartitionsToTxnRequest) []Action {
		acts := []Action{on(catalog.OpProduce, catalog.ResourceTransactionalID, m.GetSession().GetTransactionalId())}
		for _, t := range m.GetTopics() {
			acts = append(acts, on(catalog.OpProduce, catalog.ResourceTopic, t.GetTopic()))
		}
		return acts
	}),
	sluicev1connect.ProducerServiceEndTxnProcedure: one(func(m *sluicev1.EndTxnRequest) []Action {
		acts := []Action{on(catalog.OpProduce, catalog.ResourceTransactionalID, m.GetSession().GetTransactionalId())}
		for _, t := range m.GetNextPartitions() { // added to the next transaction, as AddPartitionsToTxn
			acts = append(acts, on(catalog.OpProduce, catalog.ResourceTopic, t.GetTopic()))
		}
		return acts
	}),
	sluicev1connect.ProducerServiceCommitTxnProcedure: one(func(m *sluicev1.CommitTxnRequest) []Action {
		acts := []Action{on(catalog.OpProduce, catalog.ResourceTransactionalID, m.GetSession().GetTransactionalId())}
		for _, p := range m.GetProduce() { // the batches it stores
			acts = append(acts, on(catalog.OpProduce, catalog.ResourceTopic, p.GetTopic()))
		}
		for _, t := range m.GetNextPartitions() { // added to the next transaction
			acts = append(acts, on(catalog.OpProduce, catalog.ResourceTopic, t.GetTopic()))
		}
		return acts
	}),
	sluicev1connect.ProducerServiceSendOffsetsToTxnProcedure: one(func(m *sluicev1.SendOffsetsToTxnRequest) []Action {
		return []Action{on(catalog.OpProduce, catalog.ResourceTransactionalID, m.GetSession().GetTransactionalId()),
			on(catalog.OpCommit, catalog.ResourceGroup, m.GetGroup()), on(catalog.OpConsume, catalog.ResourceTopic, m.GetTopic())}
	}),

	// SchemaService: registering and configuring a subject alters it;
	// reading describes it. Schemas by id are for every authenticated
	// caller (a consumer decodes by the id in the record).
	sluicev1connect.SchemaServiceRegisterSchemaProcedure: one(func(m *sluicev1.RegisterSchemaRequest) []Action {
		return []Action{on(catalog.OpAlter, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceLookupSchemaProcedure: one(func(m *sluicev1.LookupSchemaRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceGetSchemaProcedure: {},
	sluicev1connect.SchemaServiceGetSubjectVersionProcedure: one(func(m *sluicev1.GetSubjectVersionRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceListSubjectsProcedure: {Filter: func(_ context.Context, allowed func(Action) bool, resp any) {
		if r, ok := resp.(*sluicev1.ListSubjectsResponse); ok {
			r.Subjects = keep(r.Subjects, func(s string) bool { return allowed(on(catalog.OpDescribe, catalog.ResourceSubject, s)) })
		}
	}},
	sluicev1connect.SchemaServiceListVersionsProcedure: one(func(m *sluicev1.ListVersionsRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceDeleteSubjectProcedure: one(func(m *sluicev1.DeleteSubjectRequest) []Action {
		return []Action{on(catalog.OpDelete, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceDeleteVersionProcedure: one(func(m *sluicev1.DeleteVersionRequest) []Action {
		return []Action{on(catalog.OpDelete, catalog.ResourceSubject, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceGetCompatibilityProcedure: one(func(m *sluicev1.GetCompatibilityRequest) []Action {
		return []Action{subjectOr(catalog.OpDescribe, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceSetCompatibilityProcedure: one(func(m *sluicev1.SetCompatibilityRequest) []Action {
		return []Action{subjectOr(catalog.OpAlter, m.GetSubject())}
	}),
	sluicev1connect.SchemaServiceCheckCompatibilityProcedure: one(func(m *sluicev1.CheckCompatibilityRequest) []Action {
		return []Action{on(catalog.OpDescribe, catalog.ResourceSubject, m.GetSubject())}
	}),

	// The peer RPCs between ingest copies: the cluster's own processes.
	peerv1connect.PartitionServiceWriteMarkerProcedure: {ServiceOnly: true},
	peerv1connect.PartitionServiceGetOffsetsProcedure:  {ServiceOnly: true},
}

func inHandler(r Rule) Rule {
	r.InHandler = true
	return r
}

func triggerTopics(spec *sluicev1.TriggerSpec) []Action {
	acts := []Action{on(catalog.OpConsume, catalog.ResourceTopic, spec.GetTopic())}
	if t := spec.GetOnFailureTopic(); t != "" {
		acts = append(acts, on(catalog.OpProduce, catalog.ResourceTopic, t))
	}
	return acts
}

func keep[T any](xs []T, ok func(T) bool) []T {
	out := xs[:0]
	for _, x := range xs {
		if ok(x) {
			out = append(out, x)
		}
	}
	return out
}

// principalOf is the caller of ctx (Anonymous without credentials).
func principalOf(ctx context.Context) auth.Principal {
	if p, ok := auth.FromContext(ctx); ok {
		return p
	}
	return Anonymous
}
