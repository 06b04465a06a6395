package ingest

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// Draining open ProduceStreams at shutdown.
//
// A ProduceStream handler spends its idle time blocked in Receive, waiting
// for the producer's next request; nothing in connect-go's API unblocks it
// from the server's side, and a handler must not return while another
// goroutine is still inside Receive. So the handler's HTTP request body is
// tracked here, and shutdown closes it: Receive then fails at once, the
// handler sees the copy is draining, answers the requests it took and ends
// the stream with UNAVAILABLE. Closing a request body while it is read is
// safe in net/http (HTTP/1 and HTTP/2 bodies guard their reads).

// drainSet is the request bodies of the open ProduceStreams.
type drainSet struct {
	mu       sync.Mutex
	draining bool
	bodies   map[*drainBody]struct{}
}

// drainBody is a request body shutdown can close.
type drainBody struct {
	io.ReadCloser
	once sync.Once
}

func (b *drainBody) Close() error {
	var err error
	b.once.Do(func() { err = b.ReadCloser.Close() })
	return err
}

// add tracks b, or closes it at once if the copy is already draining.
func (d *drainSet) add(b *drainBody) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		_ = b.Close()
		return
	}
	if d.bodies == nil {
		d.bodies = make(map[*drainBody]struct{})
	}
	d.bodies[b] = struct{}{}
}

func (d *drainSet) remove(b *drainBody) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.bodies, b)
}

// drain closes every tracked body, and every body added from now on.
func (d *drainSet) drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for b := range d.bodies {
		_ = b.Close()
	}
}

func (d *drainSet) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// trackStreams wraps the ProducerService handler: ProduceStream requests
// get a body shutdown can close.
func (s *Service) trackStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/ProduceStream") {
			h.ServeHTTP(w, r)
			return
		}
		b := &drainBody{ReadCloser: r.Body}
		s.streams.add(b)
		defer s.streams.remove(b)
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

func (s *Service) isDraining() bool { return s.streams.isDraining() }
