package lambdapool

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// This file holds the Invoke API's wire rules as pure functions: how a
// function name in the path resolves, what each refusal looks like, and
// how an RIE's answer becomes Lambda's. handler.go does the I/O.

// invokePattern is the Invoke operation's route, as aws-sdk-go-v2's Lambda
// client builds it under a custom BaseEndpoint.
const invokePattern = "POST /2015-03-31/functions/{name}/invocations"

// rieInvokePath is the one function path the RIE serves.
const rieInvokePath = "/2015-03-31/functions/function/invocations"

// accountID is the account in the ARNs the pool writes: the one the RIE
// puts in the InvokedFunctionArn a handler sees.
const accountID = "012345678912"

var qualifierPattern = regexp.MustCompile(`^[a-zA-Z0-9$_-]{1,128}$`)

// parseFunctionName resolves the Invoke API's FunctionName — NAME,
// NAME:QUALIFIER, ACCOUNT:function:NAME[:QUALIFIER] or
// arn:PARTITION:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER] — to the
// name and the qualifier ("" without one). The account and region of an
// ARN are not checked: the pool has one of each.
func parseFunctionName(s string) (name, qualifier string, err error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) >= 7 && parts[0] == "arn":
		if len(parts) > 8 || parts[2] != "lambda" || parts[5] != "function" {
			return "", "", fmt.Errorf("%q is not a Lambda function ARN", s)
		}
		parts = parts[6:]
	case len(parts) == 3 || len(parts) == 4:
		if parts[1] != "function" {
			return "", "", fmt.Errorf("%q is not a function name, partial ARN or ARN", s)
		}
		parts = parts[2:]
	case len(parts) > 2:
		return "", "", fmt.Errorf("%q is not a function name, partial ARN or ARN", s)
	}
	name = parts[0]
	if !functionName.MatchString(name) {
		return "", "", fmt.Errorf("function name %q is not 1 to 64 letters, digits, '-' or '_'", name)
	}
	if len(parts) == 2 {
		qualifier = parts[1]
		if !qualifierPattern.MatchString(qualifier) {
			return "", "", fmt.Errorf("qualifier %q is not a version or alias", qualifier)
		}
	}
	return name, qualifier, nil
}

// apiError is one refusal of the Invoke API: the HTTP status, the error
// type aws-sdk-go-v2 reads from X-Amzn-ErrorType (it picks the modeled
// error type, e.g. *types.TooManyRequestsException, by this name), and the
// JSON body with the members that type has.
type apiError struct {
	status int
	typ    string
	body   map[string]string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s%s", e.status, e.typ, e.body["message"], e.body["Message"])
}

// throttled is Lambda's answer when every instance of a function (its
// reserved concurrency) is busy. No Retry-After: Lambda's answer to a
// reserved-concurrency throttle is not documented to carry one, and the
// pool cannot know when an instance frees up.
func throttled() *apiError {
	return &apiError{http.StatusTooManyRequests, "TooManyRequestsException", map[string]string{
		"Type": "User", "message": "Rate Exceeded.", "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded",
	}}
}

func notFound(region, name, qualifier string) *apiError {
	arn := "arn:aws:lambda:" + region + ":" + accountID + ":function:" + name
	if qualifier != "" {
		arn += ":" + qualifier
	}
	return &apiError{http.StatusNotFound, "ResourceNotFoundException", map[string]string{
		"Type": "User", "Message": "Function not found: " + arn,
	}}
}

func tooLarge() *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, "RequestTooLargeException", map[string]string{
		"Type": "User", "message": fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", MaxPayloadBytes),
	}}
}

func invalidParameter(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValueException", map[string]string{"Type": "User", "message": msg}}
}

func invalidContent(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidRequestContentException", map[string]string{"Type": "User", "message": msg}}
}

// serviceError is the answer when the pool could not run the invocation
// on an instance (the RIE died, or answered outside its protocol): a 5xx,
// so a caller treats it as transient — the function may or may not have
// run.
func serviceError(msg string) *apiError {
	return &apiError{http.StatusBadGateway, "ServiceException", map[string]string{"Type": "Service", "Message": msg}}
}

func unknownOperation() *apiError {
	return &apiError{http.StatusNotFound, "UnknownOperationException", map[string]string{"Type": "User", "Message": "Unknown operation"}}
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	body, err := json.Marshal(e.body)
	if err != nil {
		panic(fmt.Sprintf("lambdapool: encode an error body: %v", err)) // a map of strings always encodes
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", e.typ)
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// checkClientContext applies the Invoke API's rules to X-Amz-Client-Context:
// at most MaxClientContextBytes of base64 holding a JSON object. The RIE
// would answer a bad one with an empty 500.
func checkClientContext(cc string) *apiError {
	if cc == "" {
		return nil
	}
	if len(cc) > MaxClientContextBytes {
		return invalidContent(fmt.Sprintf("Client context must be at most %d bytes of base64", MaxClientContextBytes))
	}
	raw, err := base64.StdEncoding.DecodeString(cc)
	var obj map[string]json.RawMessage
	if err != nil || json.Unmarshal(raw, &obj) != nil {
		return invalidContent("Client context must be a valid Base64-encoded JSON object.")
	}
	return nil
}

// reply is the pool's answer to an invocation the function ran.
type reply struct {
	status int
	// functionError is X-Amz-Function-Error ("" for none).
	functionError string
	body          []byte
}

// timeoutPrefix starts the RIE's plain-text answer to a timed-out
// invocation (HTTP 200, "Task timed out after 2.00 seconds").
const timeoutPrefix = "Task timed out after "

// answer turns an RIE's answer to an invocation into Lambda's:
//
//   - 200 with aws-lambda-go's error shape ({"errorMessage","errorType"
//     [,"stackTrace"]}, a handler's returned error): 200 with
//     X-Amz-Function-Error: Unhandled, which real Lambda sets and the RIE
//     does not;
//   - 502 with that shape (a handler's panic, the runtime's exit): the
//     same — Lambda answers a crashed runtime with 200 and Unhandled;
//   - 200 with the RIE's "Task timed out after N.00 seconds": 200,
//     Unhandled, {"errorType":"Sandbox.Timedout","errorMessage":...} as
//     Lambda words it;
//   - any other 200: as is;
//   - any other status: an error, for serviceError.
//
// over says the RIE's answer exceeded MaxPayloadBytes: then 200,
// Unhandled, Function.ResponseSizeTooLarge, as Lambda answers.
func answer(status int, body []byte, over bool, requestID string) (reply, error) {
	unhandled := func(b []byte) (reply, error) { return reply{http.StatusOK, "Unhandled", b}, nil }
	switch {
	case status == http.StatusOK && over:
		return unhandled(errorBody("Function.ResponseSizeTooLarge",
			fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxPayloadBytes)))
	case status == http.StatusOK && bytes.HasPrefix(body, []byte(timeoutPrefix)):
		return unhandled(errorBody("Sandbox.Timedout", "RequestId: "+requestID+" Error: "+string(body)))
	case (status == http.StatusOK || status == http.StatusBadGateway) && !over && isErrorShape(body):
		return unhandled(body)
	case status == http.StatusOK:
		return reply{http.StatusOK, "", body}, nil
	}
	if len(body) > 256 {
		body = body[:256]
	}
	return reply{}, fmt.Errorf("the emulator answered HTTP %d: %q", status, body)
}

func errorBody(typ, msg string) []byte {
	b, err := json.Marshal(struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}{typ, msg})
	if err != nil {
		panic(fmt.Sprintf("lambdapool: encode an error body: %v", err)) // two strings always encode
	}
	return b
}

// isErrorShape reports whether body is exactly aws-lambda-go's error
// answer: an object with errorMessage and no members but errorMessage,
// errorType and stackTrace. (services/fetch/trigger.Classify reads the
// same shape as a function error when the header is missing.)
func isErrorShape(body []byte) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	if _, ok := obj["errorMessage"]; !ok {
		return false
	}
	for k := range obj {
		if k != "errorMessage" && k != "errorType" && k != "stackTrace" {
			return false
		}
	}
	return true
}
