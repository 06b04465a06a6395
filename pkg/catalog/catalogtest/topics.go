package catalogtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runTopics(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"CreateGet":           topicCreateGet,
		"CreateDuplicate":     topicCreateDuplicate,
		"CreateValidation":    topicCreateValidation,
		"GetMissing":          topicGetMissing,
		"ListPaging":          topicListPaging,
		"UpdateConfig":        topicUpdateConfig,
		"AddPartitions":       topicAddPartitions,
		"DeleteAndRecreate":   topicDeleteAndRecreate,
		"ListDeletedAndPurge": topicListDeletedAndPurge,
	})
}

func topicCreateGet(e *env) {
	cfg, err := catalog.ParseTopicConfig(map[string]string{
		catalog.KeyRetentionMs:   "3600000",
		catalog.KeyCleanupPolicy: "compact",
		catalog.KeySchemaSubject: "orders-value",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	created, err := e.b.CreateTopic(e.ctx, "orders.v1_eu-west", 12, cfg)
	if err != nil {
		e.t.Fatalf("CreateTopic: %v", err)
	}
	want := catalog.Topic{Name: "orders.v1_eu-west", ID: created.ID, Partitions: 12, Config: cfg, CreatedAt: Start, Version: 1}
	if created.ID == "" || !topicEqual(created, want) {
		e.t.Fatalf("CreateTopic returned %+v, want %+v with an id", created, want)
	}
	got, err := e.b.GetTopic(e.ctx, "orders.v1_eu-west")
	if err != nil {
		e.t.Fatalf("GetTopic: %v", err)
	}
	if !topicEqual(got, created) {
		e.t.Fatalf("GetTopic = %+v, want %+v", got, created)
	}
	other := e.topic("other", 1)
	if other.ID == created.ID {
		e.t.Fatalf("two topics share id %q", other.ID)
	}
}

func topicCreateDuplicate(e *env) {
	first := e.topic("dup", 3)
	_, err := e.b.CreateTopic(e.ctx, "dup", 5, catalog.DefaultTopicConfig())
	wantErr(e.t, err, catalog.ErrAlreadyExists, "second CreateTopic")
	got, err := e.b.GetTopic(e.ctx, "dup")
	if err != nil || !topicEqual(got, first) {
		e.t.Fatalf("after a refused create: GetTopic = %+v, %v; want the first topic %+v", got, err, first)
	}
}

func topicCreateValidation(e *env) {
	ok := catalog.DefaultTopicConfig()
	badCfg := ok
	badCfg.Replication = catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 3}
	cases := []struct {
		name       string
		partitions int
		cfg        catalog.TopicConfig
		field      string
	}{
		{"", 1, ok, "name"},
		{".", 1, ok, "name"},
		{"..", 1, ok, "name"},
		{"has space", 1, ok, "name"},
		{"slash/name", 1, ok, "name"},
		{"hash#name", 1, ok, "name"},
		{strings.Repeat("a", catalog.MaxTopicNameLength+1), 1, ok, "name"},
		{"t", 0, ok, "partitions"},
		{"t", -1, ok, "partitions"},
		{"t", catalog.MaxPartitions + 1, ok, "partitions"},
		{"t", 1, badCfg, catalog.KeyReplicationAckQuorum},
		{"t", 1, catalog.TopicConfig{}, catalog.KeyCleanupPolicy},
	}
	for _, c := range cases {
		_, err := e.b.CreateTopic(e.ctx, c.name, c.partitions, c.cfg)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("CreateTopic(%.20q, %d)", c.name, c.partitions))
	}
	// The longest legal name and the largest partition count are fine.
	e.topic(strings.Repeat("a", catalog.MaxTopicNameLength), catalog.MaxPartitions)
	page, err := e.b.ListTopics(e.ctx, "", 0)
	if err != nil || len(page.Items) != 1 {
		e.t.Fatalf("after rejected creates: ListTopics = %d topics, %v; want only the valid one", len(page.Items), err)
	}
}

func topicGetMissing(e *env) {
	_, err := e.b.GetTopic(e.ctx, "nope")
	wantErr(e.t, err, catalog.ErrNotFound, "GetTopic of a missing topic")
	_, err = e.b.GetTopic(e.ctx, "bad name")
	wantInvalid(e.t, err, "name", "GetTopic of an invalid name")
}

func topicListPaging(e *env) {
	var names []string
	for i := range 25 {
		names = append(names, fmt.Sprintf("topic-%02d", i))
	}
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(len(names)) { // fixed seed: deterministic
		e.topic(names[i], 1)
	}
	deleted := e.topic("topic-05x", 1)
	if _, err := e.b.DeleteTopic(e.ctx, deleted.Name); err != nil {
		e.t.Fatal(err)
	}

	var got []string
	token, pages := "", 0
	for {
		page, err := e.b.ListTopics(e.ctx, token, 7)
		if err != nil {
			e.t.Fatalf("ListTopics page %d: %v", pages, err)
		}
		pages++
		if len(page.Items) > 7 {
			e.t.Fatalf("page %d has %d items, limit 7", pages, len(page.Items))
		}
		for _, tp := range page.Items {
			got = append(got, tp.Name)
		}
		if page.NextPageToken == "" {
			break
		}
		if pages > 10 {
			e.t.Fatal("ListTopics does not terminate")
		}
		token = page.NextPageToken
	}
	if !slices.Equal(got, names) || pages != 4 {
		e.t.Fatalf("paged ListTopics = %v in %d pages, want %v in 4", got, pages, names)
	}

	all, err := e.b.ListTopics(e.ctx, "", 0)
	if err != nil || len(all.Items) != 25 || all.NextPageToken != "" {
		e.t.Fatalf("ListTopics(limit 0) = %d items, token %q, %v; want all 25, no token", len(all.Items), all.NextPageToken, err)
	}
	exact, err := e.b.ListTopics(e.ctx, "", 25)
	if err != nil || len(exact.Items) != 25 || exact.NextPageToken != "" {
		e.t.Fatalf("ListTopics(limit 25) = %d items, token %q, %v; want all 25, no token", len(exact.Items), exact.NextPageToken, err)
	}

	for _, limit := range []int{-1, catalog.MaxPageSize + 1} {
		_, err := e.b.ListTopics(e.ctx, "", limit)
		wantInvalid(e.t, err, "limit", fmt.Sprintf("ListTopics(limit %d)", limit))
	}
	for _, tok := range []string{"!!not a token!!", strings.Repeat("A", catalog.MaxPageTokenLength+1)} {
		_, err := e.b.ListTopics(e.ctx, tok, 5)
		wantInvalid(e.t, err, "pageToken", fmt.Sprintf("ListTopics(token %.20q)", tok))
	}
}

func topicUpdateConfig(e *env) {
	tp := e.topic("cfg", 2)
	cfg := tp.Config
	cfg.RetentionMs = 60_000
	cfg.DurabilityRelaxedAllowed = true
	e.clk.Advance(1500 * time.Millisecond)
	up, err := e.b.UpdateTopicConfig(e.ctx, "cfg", cfg, tp.Version)
	if err != nil {
		e.t.Fatalf("UpdateTopicConfig: %v", err)
	}
	if up.Version != tp.Version+1 || up.Config != cfg || up.ID != tp.ID || up.Partitions != 2 || !up.CreatedAt.Equal(tp.CreatedAt) {
		e.t.Fatalf("UpdateTopicConfig = %+v, want version %d and the new config", up, tp.Version+1)
	}
	if got, _ := e.b.GetTopic(e.ctx, "cfg"); !topicEqual(got, up) {
		e.t.Fatalf("GetTopic after update = %+v, want %+v", got, up)
	}

	stale := cfg
	stale.RetentionMs = 1
	_, err = e.b.UpdateTopicConfig(e.ctx, "cfg", stale, tp.Version)
	wantErr(e.t, err, catalog.ErrVersionConflict, "UpdateTopicConfig with a stale version")
	if got, _ := e.b.GetTopic(e.ctx, "cfg"); got.Config != cfg {
		e.t.Fatalf("a lost CAS changed the config to %+v", got.Config)
	}

	bad := cfg
	bad.MaxMessageBytes = 0
	_, err = e.b.UpdateTopicConfig(e.ctx, "cfg", bad, up.Version)
	wantInvalid(e.t, err, catalog.KeyMaxMessageBytes, "UpdateTopicConfig with a bad config")

	_, err = e.b.UpdateTopicConfig(e.ctx, "missing", cfg, 1)
	wantErr(e.t, err, catalog.ErrNotFound, "UpdateTopicConfig of a missing topic")
}

func topicAddPartitions(e *env) {
	tp := e.topic("grow", 3)
	_, err := e.b.GetPartition(e.ctx, "grow", 4)
	wantErr(e.t, err, catalog.ErrNotFound, "GetPartition beyond the count")

	up, err := e.b.AddPartitions(e.ctx, "grow", 5, tp.Version)
	if err != nil {
		e.t.Fatalf("AddPartitions: %v", err)
	}
	if up.Partitions != 5 || up.Version != tp.Version+1 || up.Config != tp.Config {
		e.t.Fatalf("AddPartitions = %+v, want 5 partitions at version %d", up, tp.Version+1)
	}
	if p := e.partition("grow", 4); p.Index != 4 || p.TopicID != tp.ID || p.Epoch != 0 {
		e.t.Fatalf("new partition 4 = %+v", p)
	}

	for _, n := range []int{5, 4, catalog.MaxPartitions + 1} {
		_, err := e.b.AddPartitions(e.ctx, "grow", n, up.Version)
		wantInvalid(e.t, err, "partitions", fmt.Sprintf("AddPartitions(%d) from 5", n))
	}
	_, err = e.b.AddPartitions(e.ctx, "grow", 8, tp.Version)
	wantErr(e.t, err, catalog.ErrVersionConflict, "AddPartitions with a stale version")
	_, err = e.b.AddPartitions(e.ctx, "missing", 8, 1)
	wantErr(e.t, err, catalog.ErrNotFound, "AddPartitions of a missing topic")
	if got, _ := e.b.GetTopic(e.ctx, "grow"); got.Partitions != 5 {
		e.t.Fatalf("refused AddPartitions changed the count to %d", got.Partitions)
	}
}

func topicDeleteAndRecreate(e *env) {
	old := e.topic("gone", 2)
	e.heartbeat("ingest-a", 30*time.Second)
	lease := e.acquire("gone", 0, "ingest-a").Lease()
	ledger := e.ledgerFor(lease, 0)

	e.clk.Advance(2 * time.Second)
	del, err := e.b.DeleteTopic(e.ctx, "gone")
	if err != nil {
		e.t.Fatalf("DeleteTopic: %v", err)
	}
	if del.ID != old.ID || !del.DeletedAt.Equal(Start.Add(2*time.Second)) {
		e.t.Fatalf("DeleteTopic returned %+v, want id %s deleted at %v", del, old.ID, Start.Add(2*time.Second))
	}
	_, err = e.b.GetTopic(e.ctx, "gone")
	wantErr(e.t, err, catalog.ErrNotFound, "GetTopic after delete")
	_, err = e.b.DeleteTopic(e.ctx, "gone")
	wantErr(e.t, err, catalog.ErrNotFound, "DeleteTopic twice")
	_, err = e.b.GetPartition(e.ctx, "gone", 0)
	wantErr(e.t, err, catalog.ErrNotFound, "GetPartition of a deleted topic")
	_, err = e.b.AcquireWriter(e.ctx, "gone", 1, "ingest-a")
	wantErr(e.t, err, catalog.ErrNotFound, "AcquireWriter on a deleted topic")
	_, err = e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: ledger.ID, FirstOffset: 0})
	wantErr(e.t, err, catalog.ErrNotFound, "AppendLedger on a deleted topic")

	// The name is free at once, for a new incarnation with fresh partitions.
	fresh := e.topic("gone", 1)
	if fresh.ID == old.ID {
		e.t.Fatalf("the recreated topic reuses id %s", old.ID)
	}
	if p := e.partition("gone", 0); p.TopicID != fresh.ID || p.Owner != "" || p.Epoch != 0 || len(p.Ledgers) != 0 {
		e.t.Fatalf("partition 0 of the recreated topic = %+v, want fresh", p)
	}
	// The old incarnation's lease has no power over the new one.
	_, err = e.b.AppendLedger(e.ctx, lease, catalog.LedgerRef{ID: ledger.ID, FirstOffset: 0})
	if err == nil {
		e.t.Fatal("AppendLedger with the old incarnation's lease succeeded on the new topic")
	}
	if p := e.partition("gone", 0); len(p.Ledgers) != 0 {
		e.t.Fatalf("old lease appended to the new topic: %+v", p)
	}
	page, err := e.b.ListTopics(e.ctx, "", 0)
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != fresh.ID {
		e.t.Fatalf("ListTopics = %+v, %v; want only the new incarnation", page.Items, err)
	}
}

func topicListDeletedAndPurge(e *env) {
	// Enough written partitions that a backend deleting them in batches
	// needs more than one.
	const parts = 30
	a := e.topic("a", parts)
	b := e.topic("b", 1)
	e.topic("c", 1)
	e.heartbeat("ingest-a", 30*time.Second)
	var leases []catalog.WriterLease
	for i := range parts {
		leases = append(leases, e.acquire("a", i, "ingest-a").Lease())
	}
	for _, n := range []string{"a", "b"} {
		if _, err := e.b.DeleteTopic(e.ctx, n); err != nil {
			e.t.Fatal(err)
		}
	}

	var got []catalog.Topic
	token := ""
	for range 5 {
		page, err := e.b.ListDeletedTopics(e.ctx, token, 1)
		if err != nil {
			e.t.Fatalf("ListDeletedTopics: %v", err)
		}
		got = append(got, page.Items...)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	wantIDs := []catalog.TopicID{a.ID, b.ID}
	slices.Sort(wantIDs)
	if len(got) != 2 || got[0].ID != wantIDs[0] || got[1].ID != wantIDs[1] {
		e.t.Fatalf("ListDeletedTopics = %+v, want ids %v in order", got, wantIDs)
	}
	for _, d := range got {
		if d.DeletedAt.IsZero() || (d.Name != "a" && d.Name != "b") {
			e.t.Fatalf("deleted topic record %+v lacks its name or deletion time", d)
		}
	}

	if err := e.b.PurgeDeletedTopic(e.ctx, a.ID); err != nil {
		e.t.Fatalf("PurgeDeletedTopic: %v", err)
	}
	wantErr(e.t, e.b.PurgeDeletedTopic(e.ctx, a.ID), catalog.ErrNotFound, "PurgeDeletedTopic twice")
	wantErr(e.t, e.b.PurgeDeletedTopic(e.ctx, "0123456789abcdef"), catalog.ErrNotFound, "PurgeDeletedTopic of an unknown id")
	page, err := e.b.ListDeletedTopics(e.ctx, "", 0)
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != b.ID {
		e.t.Fatalf("after purge: ListDeletedTopics = %+v, %v; want only b", page.Items, err)
	}
	// The purged partition records are gone, so their leases are stale.
	for _, l := range leases {
		wantErr(e.t, e.b.ReleaseWriter(e.ctx, l), catalog.ErrFenced, fmt.Sprintf("ReleaseWriter(%v) after purge", l))
	}
	_, err = e.b.ListDeletedTopics(e.ctx, "", -5)
	wantInvalid(e.t, err, "limit", "ListDeletedTopics(limit -5)")
}

func topicEqual(a, b catalog.Topic) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Partitions == b.Partitions && a.Config == b.Config &&
		a.CreatedAt.Equal(b.CreatedAt) && a.DeletedAt.Equal(b.DeletedAt) && a.Version == b.Version
}
