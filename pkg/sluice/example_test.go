package sluice_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicemq/sluice/pkg/sluice"
)

// A group consumer: partitions of "orders" are shared with the group's
// other members; what Poll returned is committed every 5 s, on revoke and
// at Close (at least once).
func ExampleClient_NewConsumer() {
	ctx := context.Background()
	c, err := sluice.NewClient("127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cons, err := c.NewConsumer("billing", []string{"orders"}, sluice.WithAutoCommit(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)
	for {
		recs, err := cons.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
}

// A plain partition reader from the earliest offset; nothing is committed.
func ExampleClient_NewReader() {
	ctx := context.Background()
	c, err := sluice.NewClient("127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	r, err := c.NewReader("orders", 0, sluice.StartAt(sluice.Earliest()))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	recs, err := r.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range recs {
		fmt.Printf("%d %s\n", rec.Offset, rec.Value)
	}
}
