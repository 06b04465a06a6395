package catalogtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runTriggers(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"CreateGet":         triggerCreateGet,
		"CreateDuplicate":   triggerCreateDuplicate,
		"CreateNoTopic":     triggerCreateNoTopic,
		"CreateValidation":  triggerCreateValidation,
		"GetMissing":        triggerGetMissing,
		"ListPaging":        triggerListPaging,
		"UpdateCAS":         triggerUpdateCAS,
		"Delete":            triggerDelete,
		"TopicDeletedAfter": triggerTopicDeletedAfter,
		"UpdateOneWinner":   triggerRaceUpdate,
		"CreateOneWinner":   triggerRaceCreate,
	})
}

func (e *env) trigger(name, topic string) catalog.Trigger {
	e.t.Helper()
	tr, err := e.b.CreateTrigger(e.ctx, name, catalog.TriggerSpec{Topic: topic, Function: "fn-" + name, Enabled: true})
	if err != nil {
		e.t.Fatalf("CreateTrigger(%q on %q): %v", name, topic, err)
	}
	return tr
}

func triggerEqual(a, b catalog.Trigger) bool {
	return a.Name == b.Name && a.TriggerSpec == b.TriggerSpec && a.TopicID == b.TopicID &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.Version == b.Version
}

// fullSpec sets every field away from its default.
func fullSpec(topic string) catalog.TriggerSpec {
	return catalog.TriggerSpec{
		Topic: topic, Function: "arn:aws:lambda:us-east-1:123456789012:function:orders-handler:live", Enabled: true,
		StartingPosition: catalog.StartTimestamp, StartingTimestampMs: Start.Add(-time.Hour).UnixMilli(),
		BatchSize: 500, MaxBatchBytes: 1 << 20, BatchWindowMs: 250, Parallelization: 4, MaxRetries: 7,
		RetryBackoffInitialMs: 200, RetryBackoffMaxMs: 60_000, MaxRecordAgeMs: 3_600_000,
		BisectOnError: true, OnFailureTopic: topic + "-dlq", ReadUncommitted: true, RunAs: "User:spiffe://sluice.test/etl",
	}
}

func triggerCreateGet(e *env) {
	tp := e.topic("orders", 3)
	spec := fullSpec("orders")
	created, err := e.b.CreateTrigger(e.ctx, "orders-to-lambda", spec)
	if err != nil {
		e.t.Fatalf("CreateTrigger: %v", err)
	}
	want := catalog.Trigger{Name: "orders-to-lambda", TriggerSpec: spec, TopicID: tp.ID, CreatedAt: Start, UpdatedAt: Start, Version: 1}
	if !triggerEqual(created, want) {
		e.t.Fatalf("CreateTrigger = %+v, want %+v", created, want)
	}
	got, err := e.b.GetTrigger(e.ctx, "orders-to-lambda")
	if err != nil || !triggerEqual(got, created) {
		e.t.Fatalf("GetTrigger = %+v, %v; want %+v", got, err, created)
	}

	// Zero fields are stored as their defaults.
	minimal, err := e.b.CreateTrigger(e.ctx, "minimal", catalog.TriggerSpec{Topic: "orders", Function: "f"})
	if err != nil {
		e.t.Fatalf("CreateTrigger(minimal): %v", err)
	}
	wantSpec := catalog.TriggerSpec{Topic: "orders", Function: "f"}.WithDefaults()
	if minimal.TriggerSpec != wantSpec || minimal.Enabled {
		e.t.Fatalf("minimal trigger = %+v, want the defaults %+v (disabled)", minimal.TriggerSpec, wantSpec)
	}
	if got, err := e.b.GetTrigger(e.ctx, "minimal"); err != nil || !triggerEqual(got, minimal) {
		e.t.Fatalf("GetTrigger(minimal) = %+v, %v; want %+v", got, err, minimal)
	}
}

func triggerCreateDuplicate(e *env) {
	e.topic("orders", 1)
	e.topic("other", 1)
	first := e.trigger("dup", "orders")
	_, err := e.b.CreateTrigger(e.ctx, "dup", catalog.TriggerSpec{Topic: "other", Function: "g"})
	wantErr(e.t, err, catalog.ErrAlreadyExists, "second CreateTrigger")
	if got, err := e.b.GetTrigger(e.ctx, "dup"); err != nil || !triggerEqual(got, first) {
		e.t.Fatalf("after a refused create: GetTrigger = %+v, %v; want %+v", got, err, first)
	}
}

func triggerCreateNoTopic(e *env) {
	_, err := e.b.CreateTrigger(e.ctx, "t", catalog.TriggerSpec{Topic: "missing", Function: "f"})
	wantErr(e.t, err, catalog.ErrNotFound, "CreateTrigger on a missing topic")
	e.topic("gone", 1)
	if _, err := e.b.DeleteTopic(e.ctx, "gone"); err != nil {
		e.t.Fatal(err)
	}
	_, err = e.b.CreateTrigger(e.ctx, "t", catalog.TriggerSpec{Topic: "gone", Function: "f"})
	wantErr(e.t, err, catalog.ErrNotFound, "CreateTrigger on a deleted topic")
	if _, err := e.b.GetTrigger(e.ctx, "t"); !errors.Is(err, catalog.ErrNotFound) {
		e.t.Fatalf("a refused create stored a trigger: %v", err)
	}
}

func triggerCreateValidation(e *env) {
	e.topic("orders", 1)
	ok := catalog.TriggerSpec{Topic: "orders", Function: "f"}
	cases := []struct {
		name  string
		edit  func(*catalog.TriggerSpec)
		field string
	}{
		{"", func(*catalog.TriggerSpec) {}, "name"},
		{"has space", func(*catalog.TriggerSpec) {}, "name"},
		{strings.Repeat("n", catalog.MaxTriggerNameLength+1), func(*catalog.TriggerSpec) {}, "name"},
		{"t", func(s *catalog.TriggerSpec) { s.Topic = "" }, "topic"},
		{"t", func(s *catalog.TriggerSpec) { s.Function = "" }, "function"},
		{"t", func(s *catalog.TriggerSpec) { s.Function = "arn:aws:sqs:us-east-1:123456789012:queue" }, "function"},
		{"t", func(s *catalog.TriggerSpec) { s.StartingPosition = "now" }, "starting_position"},
		{"t", func(s *catalog.TriggerSpec) { s.StartingPosition = catalog.StartTimestamp }, "starting_timestamp_ms"},
		{"t", func(s *catalog.TriggerSpec) { s.BatchSize = catalog.MaxTriggerBatchSize + 1 }, "batch_size"},
		{"t", func(s *catalog.TriggerSpec) { s.MaxBatchBytes = catalog.MaxTriggerBatchBytes + 1 }, "max_batch_bytes"},
		{"t", func(s *catalog.TriggerSpec) { s.BatchWindowMs = -1 }, "batch_window_ms"},
		{"t", func(s *catalog.TriggerSpec) { s.Parallelization = catalog.MaxTriggerParallelization + 1 }, "parallelization"},
		{"t", func(s *catalog.TriggerSpec) { s.MaxRetries = -5 }, "max_retries"},
		{"t", func(s *catalog.TriggerSpec) { s.RetryBackoffInitialMs, s.RetryBackoffMaxMs = 1000, 10 }, "retry_backoff_max_ms"},
		{"t", func(s *catalog.TriggerSpec) { s.MaxRecordAgeMs = 10 }, "max_record_age_ms"},
		{"t", func(s *catalog.TriggerSpec) { s.OnFailureTopic = "orders" }, "on_failure_topic"},
		{"t", func(s *catalog.TriggerSpec) { s.RunAs = "alice" }, "run_as"},
	}
	for _, c := range cases {
		s := ok
		c.edit(&s)
		_, err := e.b.CreateTrigger(e.ctx, c.name, s)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("CreateTrigger(%.20q, %+v)", c.name, s))
	}
	// Every violation at once.
	_, err := e.b.CreateTrigger(e.ctx, "bad name", catalog.TriggerSpec{Topic: "orders", Function: "bad fn", BatchSize: -1})
	for _, f := range []string{"name", "function", "batch_size"} {
		wantInvalid(e.t, err, f, "CreateTrigger with three bad fields")
	}
	page, err := e.b.ListTriggers(e.ctx, "", 0)
	if err != nil || len(page.Items) != 0 {
		e.t.Fatalf("after rejected creates: ListTriggers = %d triggers, %v; want none", len(page.Items), err)
	}
}

func triggerGetMissing(e *env) {
	_, err := e.b.GetTrigger(e.ctx, "nope")
	wantErr(e.t, err, catalog.ErrNotFound, "GetTrigger of a missing trigger")
	_, err = e.b.GetTrigger(e.ctx, "bad name")
	wantInvalid(e.t, err, "name", "GetTrigger of an invalid name")
	_, err = e.b.UpdateTrigger(e.ctx, "nope", catalog.TriggerSpec{Topic: "orders", Function: "f"}, 1)
	wantErr(e.t, err, catalog.ErrNotFound, "UpdateTrigger of a missing trigger")
	_, err = e.b.DeleteTrigger(e.ctx, "nope")
	wantErr(e.t, err, catalog.ErrNotFound, "DeleteTrigger of a missing trigger")
	_, err = e.b.DeleteTrigger(e.ctx, "bad/name")
	wantInvalid(e.t, err, "name", "DeleteTrigger of an invalid name")
}

func triggerListPaging(e *env) {
	e.topic("orders", 1)
	e.topic("t", 1) // a topic sorting near the triggers' keys must not show up
	var names []string
	for i := range 23 {
		names = append(names, fmt.Sprintf("trigger-%02d", i))
	}
	for _, i := range rand.New(rand.NewPCG(3, 4)).Perm(len(names)) { // fixed seed: deterministic
		e.trigger(names[i], "orders")
	}
	var got []string
	token, pages := "", 0
	for {
		page, err := e.b.ListTriggers(e.ctx, token, 5)
		if err != nil {
			e.t.Fatalf("ListTriggers page %d: %v", pages, err)
		}
		pages++
		if len(page.Items) > 5 {
			e.t.Fatalf("page %d has %d items, limit 5", pages, len(page.Items))
		}
		for _, tr := range page.Items {
			got = append(got, tr.Name)
		}
		if page.NextPageToken == "" {
			break
		}
		if pages > 10 {
			e.t.Fatal("ListTriggers does not terminate")
		}
		token = page.NextPageToken
	}
	if !slices.Equal(got, names) || pages != 5 {
		e.t.Fatalf("paged ListTriggers = %v in %d pages, want %v in 5", got, pages, names)
	}
	all, err := e.b.ListTriggers(e.ctx, "", 0)
	if err != nil || len(all.Items) != 23 || all.NextPageToken != "" {
		e.t.Fatalf("ListTriggers(limit 0) = %d items, token %q, %v; want all 23, no token", len(all.Items), all.NextPageToken, err)
	}
	topics, err := e.b.ListTopics(e.ctx, "", 0)
	if err != nil || len(topics.Items) != 2 {
		e.t.Fatalf("ListTopics with triggers stored = %d topics, %v; want 2", len(topics.Items), err)
	}
	for _, limit := range []int{-1, catalog.MaxPageSize + 1} {
		_, err := e.b.ListTriggers(e.ctx, "", limit)
		wantInvalid(e.t, err, "limit", fmt.Sprintf("ListTriggers(limit %d)", limit))
	}
	for _, tok := range []string{"!!not a token!!", strings.Repeat("A", catalog.MaxPageTokenLength+1)} {
		_, err := e.b.ListTriggers(e.ctx, tok, 5)
		wantInvalid(e.t, err, "pageToken", fmt.Sprintf("ListTriggers(token %.20q)", tok))
	}
}

func triggerUpdateCAS(e *env) {
	e.topic("orders", 1)
	e.topic("other", 1)
	tr := e.trigger("u", "orders")
	spec := fullSpec("orders")
	e.clk.Advance(1500 * time.Millisecond)
	up, err := e.b.UpdateTrigger(e.ctx, "u", spec, tr.Version)
	if err != nil {
		e.t.Fatalf("UpdateTrigger: %v", err)
	}
	want := catalog.Trigger{Name: "u", TriggerSpec: spec, TopicID: tr.TopicID, CreatedAt: Start, UpdatedAt: Start.Add(1500 * time.Millisecond), Version: 2}
	if !triggerEqual(up, want) {
		e.t.Fatalf("UpdateTrigger = %+v, want %+v", up, want)
	}
	if got, _ := e.b.GetTrigger(e.ctx, "u"); !triggerEqual(got, up) {
		e.t.Fatalf("GetTrigger after update = %+v, want %+v", got, up)
	}

	stale := spec
	stale.BatchSize = 1
	_, err = e.b.UpdateTrigger(e.ctx, "u", stale, tr.Version)
	wantErr(e.t, err, catalog.ErrVersionConflict, "UpdateTrigger with a stale version")
	if got, _ := e.b.GetTrigger(e.ctx, "u"); got.BatchSize != spec.BatchSize {
		e.t.Fatalf("a lost CAS changed batch size to %d", got.BatchSize)
	}

	moved := spec
	moved.Topic, moved.OnFailureTopic = "other", ""
	_, err = e.b.UpdateTrigger(e.ctx, "u", moved, up.Version)
	wantInvalid(e.t, err, "topic", "UpdateTrigger changing the topic")

	bad := spec
	bad.Parallelization = -1
	_, err = e.b.UpdateTrigger(e.ctx, "u", bad, up.Version)
	wantInvalid(e.t, err, "parallelization", "UpdateTrigger with a bad spec")

	// Back to defaults: zeros resolve again.
	reset, err := e.b.UpdateTrigger(e.ctx, "u", catalog.TriggerSpec{Topic: "orders", Function: "g"}, up.Version)
	if err != nil || reset.TriggerSpec != (catalog.TriggerSpec{Topic: "orders", Function: "g"}).WithDefaults() || reset.Version != 3 {
		e.t.Fatalf("UpdateTrigger to defaults = %+v, %v", reset, err)
	}
}

func triggerDelete(e *env) {
	e.topic("orders", 1)
	tr := e.trigger("d", "orders")
	keep := e.trigger("keep", "orders")
	del, err := e.b.DeleteTrigger(e.ctx, "d")
	if err != nil || !triggerEqual(del, tr) {
		e.t.Fatalf("DeleteTrigger = %+v, %v; want %+v", del, err, tr)
	}
	_, err = e.b.GetTrigger(e.ctx, "d")
	wantErr(e.t, err, catalog.ErrNotFound, "GetTrigger after delete")
	_, err = e.b.DeleteTrigger(e.ctx, "d")
	wantErr(e.t, err, catalog.ErrNotFound, "second DeleteTrigger")
	page, err := e.b.ListTriggers(e.ctx, "", 0)
	if err != nil || len(page.Items) != 1 || !triggerEqual(page.Items[0], keep) {
		e.t.Fatalf("ListTriggers after delete = %+v, %v; want only %q", page.Items, err, keep.Name)
	}
	// The name is free again, at version 1.
	again := e.trigger("d", "orders")
	if again.Version != 1 {
		e.t.Fatalf("re-created trigger at version %d, want 1", again.Version)
	}
}

// triggerTopicDeletedAfter: deleting the topic leaves its triggers stored
// (the runtime will see their TopicID no longer live); a re-created topic
// has a new id, so the old triggers can tell.
func triggerTopicDeletedAfter(e *env) {
	tp := e.topic("orders", 1)
	tr := e.trigger("t", "orders")
	if _, err := e.b.DeleteTopic(e.ctx, "orders"); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.b.GetTrigger(e.ctx, "t")
	if err != nil || !triggerEqual(got, tr) || got.TopicID != tp.ID {
		e.t.Fatalf("GetTrigger after the topic was deleted = %+v, %v; want %+v", got, err, tr)
	}
	tp2 := e.topic("orders", 1)
	tr2 := e.trigger("t2", "orders")
	if tr2.TopicID != tp2.ID || tr2.TopicID == tr.TopicID {
		e.t.Fatalf("trigger on the re-created topic has topic id %q; want the new %q", tr2.TopicID, tp2.ID)
	}
}

// triggerRaceUpdate: racers update one trigger at the same version; exactly
// one wins, the others get ErrVersionConflict, and the stored spec is the
// winner's.
func triggerRaceUpdate(e *env) {
	e.topic("orders", 1)
	tr := e.trigger("r", "orders")
	var winner catalog.Trigger
	var mu sync.Mutex
	errs := race(func(i int) error {
		spec := tr.TriggerSpec
		spec.BatchSize = i + 1
		up, err := e.b.UpdateTrigger(e.ctx, "r", spec, tr.Version)
		if err == nil {
			mu.Lock()
			winner = up
			mu.Unlock()
		}
		return err
	})
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, catalog.ErrVersionConflict):
			e.t.Fatalf("a losing UpdateTrigger: %v, want ErrVersionConflict", err)
		}
	}
	got, err := e.b.GetTrigger(e.ctx, "r")
	if wins != 1 || err != nil || !triggerEqual(got, winner) || got.Version != 2 {
		e.t.Fatalf("%d winners; stored %+v, %v; winner %+v", wins, got, err, winner)
	}
}

// triggerRaceCreate: racers create one name; exactly one wins.
func triggerRaceCreate(e *env) {
	e.topic("orders", 1)
	errs := race(func(i int) error {
		_, err := e.b.CreateTrigger(e.ctx, "c", catalog.TriggerSpec{Topic: "orders", Function: fmt.Sprintf("fn-%d", i)})
		return err
	})
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, catalog.ErrAlreadyExists):
			e.t.Fatalf("a losing CreateTrigger: %v, want ErrAlreadyExists", err)
		}
	}
	if wins != 1 {
		e.t.Fatalf("%d creates won, want 1", wins)
	}
}
