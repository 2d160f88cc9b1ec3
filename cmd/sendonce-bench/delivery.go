package main

import (
	"context"
	"time"
)

// sinkCount says how many messages reached rcpt, how many of them repeated
// a Message-ID, and when the last arrived (zero if unknown).
type sinkCount func(rcpt string) (n, dups int, last time.Time)

// delivery sends new keys for c.duration to a recipient of its own, then
// waits (at most c.drainWait) until every accepted send reached the sink:
// DeliveredPerSecond is the messages at the sink over the time from the
// first request to the last arrival.
func delivery(ctx context.Context, c config, count sinkCount) (*result, error) {
	c.mode = "delivery"
	c.to = newKey() + "@example.com"
	start := time.Now()
	res, err := load(ctx, c)
	if err != nil {
		return nil, err
	}
	accepted := res.Sends
	var (
		n, dups int
		last    time.Time
	)
	waitFor(ctx, c.drainWait, func() bool {
		n, dups, last = count(c.to)
		if n >= accepted && last.IsZero() {
			last = time.Now()
		}
		return n >= accepted
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Delivered = n
	if span := last.Sub(start); n > 0 && span > 0 {
		res.DeliveredPerSecond = float64(n) / span.Seconds()
	}
	dups = max(dups, n-accepted)
	res.Duplicates = &dups
	if n < accepted {
		res.Statuses["undelivered"] = accepted - n
		res.Errors += accepted - n
	}
	return res, nil
}

// waitFor polls done until it is true or the wait is over; it reports
// whether done came true.
func waitFor(ctx context.Context, wait time.Duration, done func() bool) bool {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	deadline := time.Now().Add(wait)
	for {
		if done() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
