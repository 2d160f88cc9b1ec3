package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// storm sends each of up to c.stormKeys keys c.stormDupes times at once
// (released together, spread round robin over the servers), with about
// c.concurrency requests in flight, until the keys or c.duration run out.
// 200 (first or replay) and 409 (in flight) are the expected answers. Then
// every stormed key is looked up: exactly one send each.
func storm(ctx context.Context, c config) (*result, error) {
	hc := newClient(max(c.concurrency, c.stormDupes))
	body := sendBody(c.to)
	keys := make([]string, c.stormKeys)
	for i := range keys {
		keys[i] = newKey()
	}
	var (
		rec  recorder
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(c.duration)
	for range max(1, c.concurrency/c.stormDupes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				var (
					gw    sync.WaitGroup
					ready = make(chan struct{})
				)
				for d := range c.stormDupes {
					gw.Add(1)
					go func() {
						defer gw.Done()
						<-ready
						t0 := time.Now()
						st, err := post(ctx, hc, c.urls[(i+d)%len(c.urls)], c.key, keys[i], body)
						lat := []time.Duration{time.Since(t0)}
						switch {
						case ctx.Err() != nil:
						case err != nil:
							rec.add(lat, map[string]int{"error": 1})
						default:
							rec.add(lat, map[string]int{fmt.Sprint(st): 1})
						}
					}()
				}
				close(ready)
				gw.Wait()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := rec.result("storm", c, time.Since(start), "200", "409")
	stormed := keys[:min(int(next.Load()), len(keys))]
	dups, missing, err := countSends(ctx, hc, c, stormed)
	if err != nil {
		return nil, err
	}
	res.Duplicates = &dups
	res.Sends = len(stormed) - missing + dups
	if missing > 0 {
		res.Statuses["missing"] = missing
		res.Errors += missing
	}
	return res, nil
}

// countSends looks every key up (GET /v1/sends?idempotency_key=) and
// returns the sends beyond one per key, and the keys with none.
func countSends(ctx context.Context, hc *http.Client, c config, keys []string) (dups, missing int, err error) {
	var mu sync.Mutex
	errs := eachIndex(ctx, min(c.concurrency, len(keys)), len(keys), func(w, i int) error {
		n, err := sendsFor(ctx, hc, c.urls[(w+i)%len(c.urls)], c.key, keys[i])
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if n == 0 {
			missing++
		} else {
			dups += n - 1
		}
		return nil
	})
	if len(errs) > 0 {
		return 0, 0, fmt.Errorf("look sends up by key: %w", errors.Join(errs...))
	}
	return dups, missing, ctx.Err()
}

func sendsFor(ctx context.Context, hc *http.Client, base, apiKey, idemKey string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sends?limit=100&idempotency_key="+url.QueryEscape(idemKey), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, fmt.Errorf("GET /v1/sends: status %d (the key needs the read scope)", resp.StatusCode)
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return 0, fmt.Errorf("GET /v1/sends: %w", err)
	}
	return len(list.Data), nil
}

// eachIndex calls fn(w, i) for every i below n from workers goroutines
// (w is the worker's number), each taking the next index in turn. A
// worker stops at the first error fn returns, or when ctx ends; the
// others go on. It returns the errors fn returned.
func eachIndex(ctx context.Context, workers, n int, fn func(w, i int) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(w, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errs
}
