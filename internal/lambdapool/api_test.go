package lambdapool

import (
	"strings"
	"testing"
)

func TestParseFunctionName(t *testing.T) {
	for _, tc := range []struct{ in, name, qualifier string }{
		{"echo", "echo", ""},
		{"my_fn-2", "my_fn-2", ""},
		{"echo:live", "echo", "live"},
		{"echo:$LATEST", "echo", "$LATEST"},
		{"123456789012:function:echo", "echo", ""},
		{"123456789012:function:echo:3", "echo", "3"},
		{"arn:aws:lambda:us-east-1:123456789012:function:echo", "echo", ""},
		{"arn:aws-cn:lambda:cn-north-1:123456789012:function:echo:prod", "echo", "prod"},
	} {
		name, q, err := parseFunctionName(tc.in)
		if err != nil || name != tc.name || q != tc.qualifier {
			t.Errorf("parseFunctionName(%q) = %q, %q, %v; want %q, %q", tc.in, name, q, err, tc.name, tc.qualifier)
		}
	}
	for _, in := range []string{
		"", "a:b:c", "1:layer:echo", "arn:aws:s3:us-east-1:1:function:echo", "arn:aws:lambda:us-east-1:1:layer:echo",
		"arn:aws:lambda:us-east-1:1:function:echo:1:2", "echo:", "echo:a/b", "has space", strings.Repeat("a", 65),
		"arn:aws:lambda:us-east-1:1:function",
	} {
		if name, q, err := parseFunctionName(in); err == nil {
			t.Errorf("parseFunctionName(%q) = %q, %q; want an error", in, name, q)
		}
	}
}

func TestAnswer(t *testing.T) {
	big := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		over      bool
		wantError bool
		fnErr     string
		wantBody  string
	}{
		{"answer", 200, `{"records":1}`, false, false, "", `{"records":1}`},
		{"not JSON", 200, `hello`, false, false, "", `hello`},
		{"empty", 200, ``, false, false, "", ``},
		{"handler error", 200, `{"errorMessage":"x","errorType":"y"}`, false, false, "Unhandled", `{"errorMessage":"x","errorType":"y"}`},
		{"error message only", 200, `{"errorMessage":"x"}`, false, false, "Unhandled", `{"errorMessage":"x"}`},
		{"more than the error shape", 200, `{"errorMessage":"x","ok":true}`, false, false, "", `{"errorMessage":"x","ok":true}`},
		{"panic", 502, `{"errorMessage":"p","errorType":"string","stackTrace":[]}`, false, false, "Unhandled", `{"errorMessage":"p","errorType":"string","stackTrace":[]}`},
		{"timeout", 200, `Task timed out after 3.00 seconds`, false, false, "Unhandled",
			`{"errorType":"Sandbox.Timedout","errorMessage":"RequestId: rid Error: Task timed out after 3.00 seconds"}`},
		{"too large", 200, ``, true, false, "Unhandled",
			`{"errorType":"Function.ResponseSizeTooLarge","errorMessage":"Response payload size exceeded maximum allowed payload size (6291456 bytes)."}`},
		{"502 not the error shape", 502, `gateway`, false, true, "", ""},
		{"500", 500, ``, false, true, "", ""},
		{"400", 400, big, false, true, "", ""},
	} {
		rep, err := answer(tc.status, []byte(tc.body), tc.over, "rid")
		if tc.wantError {
			if err == nil || len(err.Error()) > 320 {
				t.Errorf("%s: answer = %+v, %v; want a short error", tc.name, rep, err)
			}
			continue
		}
		if err != nil || rep.status != 200 || rep.functionError != tc.fnErr || string(rep.body) != tc.wantBody {
			t.Errorf("%s: answer = %d %q %s, %v; want 200 %q %s", tc.name, rep.status, rep.functionError, rep.body, err, tc.fnErr, tc.wantBody)
		}
	}
}
