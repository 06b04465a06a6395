package client

import (
	"connectrpc.com/connect"
)

// pumpStream is the sender of one generation of a shared stream (addMux,
// lacMux), run on its owner's goroutine: it sends the messages next
// returns until next reports the generation's end (its error), and starts
// a receiver goroutine, owned by the client, on the first successful send,
// which hands every response to route. fail hears why the generation
// ended: next's error, the receiver's, or a send's when nothing was
// received yet (the receiver reports the server's real error first
// otherwise). It closes both sides of the stream before it returns.
func pumpStream[Req, Resp any](c *Client, stream *connect.BidiStreamForClient[Req, Resp], next func() ([]*Req, error), sent func(), route func(*Resp), fail func(error)) {
	receiving := false
	defer func() {
		_ = stream.CloseRequest()
		if !receiving {
			_ = stream.CloseResponse()
		}
	}()
	for {
		msgs, err := next()
		if err != nil {
			fail(err)
			return
		}
		for _, msg := range msgs {
			if err := stream.Send(msg); err != nil {
				if !receiving {
					fail(err)
				}
				return
			}
			sent()
			if receiving {
				continue
			}
			receiving = true
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer func() { _ = stream.CloseResponse() }()
				for {
					resp, err := stream.Receive()
					if err != nil {
						fail(err)
						return
					}
					route(resp)
				}
			}()
		}
	}
}
