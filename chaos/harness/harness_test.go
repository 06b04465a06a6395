package harness

import (
	"strings"
	"testing"
)

// Scenario names are unique (they name history files), every scenario has
// a schedule and a phase, and a sabotage tag names a build tag.
func TestScenariosWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range Scenarios() {
		switch {
		case sc.Name == "" || seen[sc.Name]:
			t.Errorf("scenario name %q empty or reused", sc.Name)
		case sc.Faults == nil || sc.Phase <= 0 || sc.Partitions <= 0:
			t.Errorf("%s: no schedule, phase or partitions", sc.Name)
		case sc.Sabotage == "" && len(sc.MoreSabotages) > 0:
			t.Errorf("%s: MoreSabotages without Sabotage", sc.Name)
		case sc.Members == 0:
			t.Errorf("%s: no members: nothing would drain it", sc.Name)
		}
		for _, tag := range sc.Sabotages() {
			if !strings.HasPrefix(tag, "sabotage_") {
				t.Errorf("%s: sabotage tag %q", sc.Name, tag)
			}
		}
		seen[sc.Name] = true
		if ScenarioByName(sc.Name) == nil {
			t.Errorf("ScenarioByName(%q) = nil", sc.Name)
		}
	}
}

func TestSelected(t *testing.T) {
	for _, c := range []struct {
		list, name string
		want       bool
	}{{"", "x", true}, {"a,x", "x", true}, {"a, x ", "x", true}, {"a,xy", "x", false}} {
		if got := Selected(c.list, c.name); got != c.want {
			t.Errorf("Selected(%q, %q) = %v", c.list, c.name, got)
		}
	}
}

func TestTableMarksFailures(t *testing.T) {
	tab := Table([]Summary{
		{Scenario: "ok-one"},
		{Scenario: "bad-one", Anomalies: 2, ByKind: map[string]int{"lost-write": 2}},
		{Scenario: "broken", Error: "drain stuck"},
	})
	for _, want := range []string{"| ok-one | - |", "| OK |", "FAIL map[lost-write:2]", "ERROR: drain stuck"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// The CI smoke version runs every sabotage tag exactly once, with the
// scenario whose sabotage phase is the shortest; the full version every
// (scenario, tag) pair.
func TestSabotageRunsPerTag(t *testing.T) {
	all := SabotageRuns(Scenarios(), DefaultScale, false)
	perTag := SabotageRuns(Scenarios(), DefaultScale, true)
	tags := map[string]bool{}
	for _, r := range all {
		tags[r.Tag] = true
	}
	got := map[string]*Scenario{}
	for _, r := range perTag {
		if got[r.Tag] != nil {
			t.Errorf("tag %s runs twice", r.Tag)
		}
		got[r.Tag] = r.Scenario
		t.Logf("%s: %s (%v)", r.Tag, r.Scenario.Name, r.Scenario.SabotagePhase(DefaultScale))
	}
	if len(got) != len(tags) {
		t.Fatalf("per tag: %d tags, want %d", len(got), len(tags))
	}
	for _, r := range all {
		if r.Scenario.SabotagePhase(DefaultScale) < got[r.Tag].SabotagePhase(DefaultScale) {
			t.Errorf("%s: %s has a shorter sabotage phase than the chosen %s", r.Tag, r.Scenario.Name, got[r.Tag].Name)
		}
	}
	if len(all) <= len(perTag) {
		t.Errorf("every pair: %d runs, per tag %d: no tag is shared, the test proves nothing", len(all), len(perTag))
	}
}
