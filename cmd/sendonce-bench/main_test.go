package main

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// The load tool measures what it claims: requests answered 200, counted,
// with ordered percentiles; replays create no new sends.
func TestLoad_NewAndReplay(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	ctx := context.Background()
	c := config{urls: []string{env.URL}, key: env.AdminKey, mode: "new", duration: 300 * time.Millisecond, concurrency: 4}
	res, err := load(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// Requests cut off by the end of the run are not counted but may still
	// complete on the server: at most one per client.
	time.Sleep(200 * time.Millisecond)
	sends := env.QueryInt(t, `SELECT count(*) FROM sends`)
	if res.Requests == 0 || res.Errors != 0 || res.Statuses["200"] != res.Requests || sends < res.Requests || sends > res.Requests+c.concurrency {
		t.Fatalf("new: %+v, %d sends in the database", res, sends)
	}
	if !(res.P50 > 0 && res.P50 <= res.P99 && res.P99 <= res.P999) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	c.mode, c.replayKeys = "replay", 5
	res, err = load(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Errors != 0 {
		t.Fatalf("replay: %+v", res)
	}
	if got := env.QueryInt(t, `SELECT count(*) FROM sends`); got != sends+5 {
		t.Fatalf("replay run made %d sends, want only its 5 prepared keys", got-sends)
	}
}
