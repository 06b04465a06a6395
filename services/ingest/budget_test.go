package ingest

import (
	"context"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if !b.acquire(ctx, 60, 0) || !b.acquire(ctx, 40, 0) {
		t.Fatal("could not fill the budget")
	}
	if b.acquire(ctx, 1, 5*time.Millisecond) {
		t.Fatal("acquired beyond the budget")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(ctx, 50, 10*time.Second) }()
	b.release(60)
	if !<-got {
		t.Fatal("a waiter did not get the freed bytes")
	}
	b.release(40)
	b.release(50)
	if !b.acquire(ctx, 500, 0) {
		t.Fatal("a request larger than the budget was refused although nothing is held")
	}
	if b.acquire(ctx, 1, 0) {
		t.Fatal("acquired while an oversized request holds everything")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if b.acquire(cctx, 1, time.Minute) {
		t.Fatal("acquired after the context ended")
	}
}
