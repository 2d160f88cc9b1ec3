package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// load sends for c.duration from c.concurrency goroutines: new keys, or in
// replay mode the same c.replayKeys keys again. A request under way when
// the time is up is waited for and counted, so the counts are exact.
func load(ctx context.Context, c config) (*result, error) {
	hc := newClient(c.concurrency)
	body := sendBody(c.to)
	var keys []string
	if c.mode == "replay" {
		for i := range c.replayKeys {
			k := newKey()
			if st, err := post(ctx, hc, c.urls[i%len(c.urls)], c.key, k, body); err != nil || st != http.StatusOK {
				return nil, fmt.Errorf("prepare replay keys: status %d, %v", st, err)
			}
			keys = append(keys, k)
		}
	}
	var (
		rec recorder
		n   atomic.Int64
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(c.duration)
	for w := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			localStatus := map[string]int{}
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				seq := n.Add(1)
				url := c.urls[int(seq)%len(c.urls)]
				k := ""
				if c.mode == "replay" {
					k = keys[(w+i)%len(keys)]
				} else {
					k = newKey()
				}
				t0 := time.Now()
				st, err := post(ctx, hc, url, c.key, k, body)
				if ctx.Err() != nil {
					break // interrupted: the run is abandoned
				}
				local = append(local, time.Since(t0))
				if err != nil {
					localStatus["error"]++
				} else {
					localStatus[fmt.Sprint(st)]++
				}
			}
			rec.add(local, localStatus)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := rec.result(c.mode, c, time.Since(start), "200")
	if c.mode == "replay" {
		res.Sends = len(keys)
		dups, missing, err := countSends(ctx, hc, c, keys)
		if err != nil {
			return nil, err
		}
		res.Duplicates = &dups
		if missing > 0 {
			res.Statuses["missing"] = missing
			res.Errors += missing
		}
	} else {
		res.Sends = res.Statuses["200"]
	}
	return res, nil
}
