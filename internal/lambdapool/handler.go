package lambdapool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// invokeGrace is how long past a function's timeout the pool waits for an
// instance's answer before it gives the instance up (stops it; its
// supervisor starts another). The RIE enforces the timeout itself and
// answers "Task timed out"; the grace covers the function's init, which
// the first invocation of a process runs before it (Lambda bounds init at
// 10 s).
const invokeGrace = 15 * time.Second

// serveInvoke is the Invoke operation.
func (p *Pool) serveInvoke(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	w.Header().Set("X-Amzn-RequestId", reqID)
	name, qualifier, err := parseFunctionName(r.PathValue("name"))
	if err != nil {
		writeAPIError(w, invalidParameter(err.Error()))
		return
	}
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		switch {
		case !qualifierPattern.MatchString(q):
			writeAPIError(w, invalidParameter(fmt.Sprintf("qualifier %q is not a version or alias", q)))
			return
		case qualifier != "" && q != qualifier:
			writeAPIError(w, invalidParameter("The derived qualifier from the function name does not match the specified qualifier."))
			return
		}
		qualifier = q
	}
	f := p.functions[name]
	if f == nil {
		writeAPIError(w, notFound(p.cfg.Region, name, qualifier))
		return
	}
	switch t := r.Header.Get("X-Amz-Invocation-Type"); t {
	case "", "RequestResponse":
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		writeAPIError(w, invalidParameter(fmt.Sprintf("InvocationType %q: lambdapool runs RequestResponse (and DryRun) invocations only", t)))
		return
	}
	cc := r.Header.Get("X-Amz-Client-Context")
	if e := checkClientContext(cc); e != nil {
		writeAPIError(w, e)
		return
	}
	if r.ContentLength > MaxPayloadBytes {
		writeAPIError(w, tooLarge())
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil {
		writeAPIError(w, invalidContent("could not read the request body: "+err.Error()))
		return
	}
	if len(payload) > MaxPayloadBytes {
		writeAPIError(w, tooLarge())
		return
	}
	if len(payload) > 0 && !json.Valid(payload) {
		writeAPIError(w, invalidContent("Could not parse request body into json: the payload is not valid JSON"))
		return
	}
	in, b, ok := f.acquire()
	if !ok {
		p.log.Debug("invoke throttled", "function", name, "request_id", reqID)
		writeAPIError(w, throttled())
		return
	}
	rep, err := p.invoke(f, in, b, reqID, cc, payload)
	if err != nil {
		writeAPIError(w, serviceError(err.Error()))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amz-Executed-Version", "$LATEST")
	if rep.functionError != "" {
		h.Set("X-Amz-Function-Error", rep.functionError)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// invoke runs one invocation on b, which the caller acquired on in, and
// releases in. It does not follow the caller's request context: an RIE
// must never get a second invocation while it runs one (it crashes), so
// the instance stays taken until the RIE answers, as a Lambda instance
// stays busy after its caller hung up. When the RIE does not answer
// within the function's timeout plus invokeGrace, fails mid-answer, or
// answers outside its protocol, its state is unknown: the instance is
// stopped and its supervisor starts another.
func (p *Pool) invoke(f *function, in *instance, b backend, reqID, cc string, payload []byte) (reply, error) {
	log := p.log.With("function", f.cfg.Name, "instance", in.index, "pid", b.PID(), "request_id", reqID)
	ctx, cancel := context.WithTimeout(p.ctx, f.cfg.Timeout+invokeGrace)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.Addr()+rieInvokePath, bytes.NewReader(payload))
	if err != nil {
		panic(fmt.Sprintf("lambdapool: build the request to an instance: %v", err)) // a fixed method and a host:port URL
	}
	req.Header.Set("Content-Type", "application/json")
	// The RIE takes the request id as the invocation's (lambdacontext's
	// AwsRequestID) and the client context as the handler's.
	req.Header.Set("X-Amzn-RequestId", reqID)
	if cc != "" {
		req.Header.Set("X-Amz-Client-Context", cc)
	}
	started := time.Now()
	var rep reply
	resp, err := p.client.Do(req)
	if err == nil {
		var body []byte
		var over bool
		body, over, err = readBounded(resp.Body)
		resp.Body.Close()
		if err == nil {
			rep, err = answer(resp.StatusCode, body, over, reqID)
		}
	}
	if err != nil {
		b.Stop(0) // before release: a broken process is never handed out again
		f.release(in)
		if p.ctx.Err() != nil {
			return reply{}, fmt.Errorf("the pool is closing")
		}
		log.Warn("invoke failed; restarting the instance", "err", err, "took", time.Since(started))
		return reply{}, fmt.Errorf("instance %d of function %s failed during the invocation and is being restarted: %v", in.index, f.cfg.Name, err)
	}
	f.release(in)
	log.Debug("invoked", "function_error", rep.functionError, "bytes", len(rep.body), "took", time.Since(started))
	return rep, nil
}

// readBounded reads at most MaxPayloadBytes of r; over says there was
// more (the rest is left unread).
func readBounded(r io.Reader) (body []byte, over bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, MaxPayloadBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(body) > MaxPayloadBytes {
		return nil, true, nil
	}
	return body, false, nil
}

// newRequestID returns a random UUID (version 4), Lambda's request id form.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
