package main

import "time"

// wallNow is the wall clock the services and bookies judge liveness and
// deadlines by and stamp what other processes judge (catalog heartbeats and
// owner expiry, group members' heartbeats, transaction deadlines, append
// times). It is time.Now in every real build; the chaos build (tag
// chaos_clock, clock_chaos.go) offsets it so that a scenario can skew one
// process's clock.
var wallNow = time.Now
