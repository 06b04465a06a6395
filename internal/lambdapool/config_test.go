package lambdapool

import (
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEveryViolation(t *testing.T) {
	err := Config{
		StartTimeout: -1,
		Functions: []Function{
			{Name: "ok", Bootstrap: "/b"},
			{Name: "ok", Bootstrap: "/b"},
			{Name: "bad name", Instances: MaxInstances + 1, Timeout: 1500 * time.Millisecond,
				Env: []string{"NOEQUALS", "=v", "AWS_REGION=x", "AWS_LAMBDA_MAX_CONCURRENCY=2", "FINE=a=b"}},
		},
	}.Validate()
	if err == nil {
		t.Fatal("Validate = nil")
	}
	for _, want := range []string{
		"RIE: the path", "StartTimeout", `"ok"): the name is used twice`, `"bad name"): the name must be`,
		"Bootstrap is required", "Instances 65", "Timeout 1.5s", `"NOEQUALS" is not KEY=VALUE`, `"=v" is not`,
		"may not set AWS_REGION", "may not set AWS_LAMBDA_MAX_CONCURRENCY",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v\nwant it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "FINE") {
		t.Errorf("Validate rejected FINE=a=b: %v", err)
	}
	if err := (Config{RIE: "/r", Functions: []Function{{Name: "f", Bootstrap: "/b", Timeout: MaxTimeout}}}).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	if err := (Config{RIE: "/r"}).Validate(); err == nil || !strings.Contains(err.Error(), "at least one function") {
		t.Fatalf("no functions: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	c := Config{Functions: []Function{{Name: "f"}}}.withDefaults()
	f := c.Functions[0]
	if c.Addr != "127.0.0.1:0" || c.Region != "us-east-1" || c.StartTimeout != 10*time.Second ||
		c.StopGrace != 5*time.Second || c.Logger == nil || f.Instances != 1 || f.Timeout != DefaultTimeout {
		t.Fatalf("withDefaults = %+v", c)
	}
}
