// Package lambdapool serves the Lambda Invoke API for real aws-lambda-go
// handlers, each run under AWS's Runtime Interface Emulator (RIE) by a
// fixed number of processes, so that local runs and integration tests
// invoke functions with concurrency, as on Lambda, through the unchanged
// aws-sdk-go-v2 Lambda client (a custom BaseEndpoint).
//
// One RIE process runs one invocation at a time (a second concurrent one
// crashes it) and serves one function, named "function". A Pool puts
// several named functions behind one endpoint, each with N RIE processes
// (its instances: its reserved concurrency), and hands every invocation to
// a free instance.
//
// # What it emulates
//
//   - POST /2015-03-31/functions/{FunctionName}/invocations, the Invoke
//     operation, with FunctionName as NAME, NAME:QUALIFIER, a partial ARN
//     (ACCOUNT:function:NAME[:QUALIFIER]) or an ARN, and the Qualifier
//     query parameter. A qualifier is accepted and ignored: every version
//     and alias is the one binary ($LATEST).
//   - Throttling: when every instance runs an invocation (or is
//     restarting), HTTP 429 TooManyRequestsException with Reason
//     ReservedFunctionConcurrentInvocationLimitExceeded and no Retry-After
//     (the pool cannot know when an instance frees up), which the SDK
//     returns as *types.TooManyRequestsException. Invocations never queue.
//   - Refusals as Lambda words them, with the X-Amzn-ErrorType the SDK
//     decodes into its modeled errors: unknown function 404
//     ResourceNotFoundException; payload over 6 MB 413
//     RequestTooLargeException; a payload that is not JSON or a bad
//     X-Amz-Client-Context 400 InvalidRequestContentException.
//   - Function errors as Lambda reports them: HTTP 200 with
//     X-Amz-Function-Error: Unhandled for a handler's returned error, its
//     panic, the runtime's exit and a timeout (the RIE answers these with
//     200 or 502 and no header, and a timeout in plain text), and for an
//     answer over 6 MB.
//   - The client context and a fresh request id (X-Amzn-RequestId, the
//     handler's lambdacontext AwsRequestID) reach the handler; the answer
//     carries the request id and X-Amz-Executed-Version: $LATEST.
//   - Instances are processes that can die: an instance whose RIE exits is
//     restarted (on new ports), and the invocation it was running, if any,
//     gets HTTP 502 ServiceException — the function may or may not have
//     run. An instance that does not answer within the function's timeout
//     plus a grace is stopped and restarted the same way.
//   - A caller that hangs up does not free the instance: the invocation
//     runs to its end, as on Lambda.
//
// # What it does not
//
// Asynchronous invocations (InvocationType Event: 400), response
// streaming, versions and aliases, log tails (X-Amz-Log-Type), the
// control plane (CreateFunction and the rest), account-level concurrency,
// provisioned concurrency and cold-start placement (an instance's process
// runs the function's init on its first invocation, then stays warm),
// memory limits, and authentication (requests are not checked).
//
// # Processes
//
// Each instance is one RIE process on two loopback ports picked free
// (--runtime-interface-emulator-address, --runtime-api-address), started
// in the bootstrap's directory, with AWS_LAMBDA_MAX_CONCURRENCY unset (it
// would switch the RIE to a mode that cannot run here),
// AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_TIMEOUT and AWS_REGION set,
// plus the function's own environment. Start waits until every instance
// listens (a TCP connect: a probe invocation would run user code). The RIE
// starts the bootstrap in a process group of its own and a killed RIE
// leaves it running until its invocation ends, so every instance carries a
// marker in its environment (SLUICE_LAMBDAPOOL_INSTANCE, which the RIE
// forwards to the bootstrap) and stopping an instance also kills the
// processes that carry its marker (Linux). Close stops every instance
// (SIGTERM, then SIGKILL) and waits for every process and goroutine; on
// Linux the kernel also kills the RIEs if the pool's process dies.
//
// # Files
//
//   - config.go: Config, Function, their limits and Validate.
//   - api.go: the Invoke API's wire rules as pure functions (names,
//     refusals, turning an RIE answer into Lambda's).
//   - handler.go: the Invoke operation over an instance.
//   - pool.go: Start, the instances, their supervisors, Close.
//   - process.go: RIE processes (the backend seam the tests replace with
//     httptest servers), ports, output to slog.
//   - sysproc_*.go: process attributes and finding a bootstrap left behind.
//
// Package lambdatest starts a Pool of functions built from Go packages for
// integration tests; cmd/lambdapool serves one from the command line
// (localstack/lambda.sh runs it).
package lambdapool
