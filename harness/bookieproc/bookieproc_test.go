package bookieproc

import "testing"

func TestWatchClosesOnTheLineThatHoldsTheText(t *testing.T) {
	p := &Proc{log: new(lockedBuffer)}
	ch := p.Watch("holding transaction ")
	other := p.Watch("never printed")
	_, _ = p.log.Write([]byte("copied 3 records in 1 transactions\n"))
	select {
	case <-ch:
		t.Fatal("closed by a line without the text")
	default:
	}
	_, _ = p.log.Write([]byte("holding transaction eos.g.a.0:4 (3 records) for 100ms\n"))
	select {
	case <-ch:
	default:
		t.Fatal("not closed by the line holding the text")
	}
	// A second match must not close the channel again (a panic).
	_, _ = p.log.Write([]byte("holding transaction eos.g.a.0:5 (1 records) for 100ms\n"))
	select {
	case <-other:
		t.Fatal("a watch for other text was closed")
	default:
	}
	if got := len(p.log.watchers); got != 1 {
		t.Fatalf("%d watchers left; want 1 (the unmatched one)", got)
	}
	if never := (&Proc{}).Watch("x"); never == nil {
		t.Fatal("a process never started returns a nil channel")
	}
}
