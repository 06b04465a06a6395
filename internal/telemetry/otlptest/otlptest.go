// Package otlptest is an OTLP collector stand-in for tests: an HTTP server
// that accepts OTLP/HTTP protobuf exports (POST /v1/traces, as the
// exporters send with OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf) and keeps
// the spans, so a test can point real processes at it
// (OTEL_EXPORTER_OTLP_ENDPOINT=Receiver.URL) and look at the traces they
// produced. It keeps at most MaxSpans spans; gzip-encoded bodies are
// accepted (the exporters' OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// MaxSpans bounds what a Receiver keeps; spans beyond it are dropped (and
// counted in Dropped).
const MaxSpans = 100_000

// maxBody bounds one export request (the exporters' batches are far
// smaller: 512 spans by default).
const maxBody = 32 << 20

// Span is one received span, flattened.
type Span struct {
	Service  string // the resource's service.name
	Name     string
	Kind     tracepb.Span_SpanKind
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; "" for a root span
	// Links are the linked spans' trace and span ids, "trace/span" in hex.
	Links      []string
	Attributes map[string]string // values as strings (ints in decimal)
	StatusCode tracepb.Status_StatusCode
}

// Receiver is a running collector stand-in. Close it.
type Receiver struct {
	// URL is the base URL to export to (OTEL_EXPORTER_OTLP_ENDPOINT).
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span // guarded by mu
	dropped int    // guarded by mu
}

// Start starts a Receiver on a loopback port.
func Start() *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.traces)
	r.srv = httptest.NewServer(mux)
	r.URL = r.srv.URL
	return r
}

// Close stops the server.
func (r *Receiver) Close() { r.srv.Close() }

// Spans returns a copy of the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Dropped is the number of spans received beyond MaxSpans.
func (r *Receiver) Dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Trace returns the received spans of one trace.
func (r *Receiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Service: service, Name: s.GetName(), Kind: s.GetKind(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Attributes: attrs(s.GetAttributes()), StatusCode: s.GetStatus().GetCode(),
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	room := max(0, MaxSpans-len(r.spans))
	if len(got) > room {
		r.dropped += len(got) - room
		got = got[:room]
	}
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		panic(err) // an empty message always marshals
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrs flattens OTLP attributes to strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(x.BoolValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
