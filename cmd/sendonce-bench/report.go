package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

func printTable(w io.Writer, rows []*result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tservers\tconcurrency\trequests\treq/s\tp50\tp99\tp999\terrors\tduplicates\tdelivered/s\tpeak RSS\t")
	for _, r := range rows {
		dups, dps, rss := "-", "-", "-"
		if r.Duplicates != nil {
			dups = fmt.Sprint(*r.Duplicates)
		}
		if r.Mode == "delivery" {
			dps = fmt.Sprintf("%.0f", r.DeliveredPerSecond)
		}
		if r.PeakRSSKiB > 0 {
			rss = fmt.Sprintf("%.0fMiB", float64(r.PeakRSSKiB)/1024)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.Mode, r.Servers, r.Concurrency, r.Requests,
			r.PerSecond, ms(r.P50), ms(r.P99), ms(r.P999), r.Errors, dups, dps, rss)
	}
	return tw.Flush()
}

func writeJSON(file string, stdout io.Writer, rows []*result) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if file == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// result is one row: one mode's run.
type result struct {
	Mode        string `json:"mode"`
	Servers     int    `json:"servers"`
	Concurrency int    `json:"concurrency"`
	// Requests counts every answered request; Sends the sends it created
	// (200s with new keys).
	Requests  int            `json:"requests"`
	Sends     int            `json:"sends"`
	Seconds   float64        `json:"seconds"`
	PerSecond float64        `json:"per_second"`
	P50       time.Duration  `json:"p50_ns"`
	P99       time.Duration  `json:"p99_ns"`
	P999      time.Duration  `json:"p999_ns"`
	Errors    int            `json:"errors"`
	Statuses  map[string]int `json:"statuses"`
	// Duplicates is checked by replay, storm and delivery: sends beyond
	// one per key, or messages beyond one per send at the sink.
	Duplicates *int `json:"duplicates,omitempty"`
	// Delivered is how many of this run's sends reached the sink, and
	// DeliveredPerSecond that count over the time from the first request
	// to the last arrival (delivery mode).
	Delivered          int     `json:"delivered,omitempty"`
	DeliveredPerSecond float64 `json:"delivered_per_second,omitempty"`
	// PeakRSSKiB is the largest VmHWM of the spawned processes at the end
	// of the run (0 when none were spawned).
	PeakRSSKiB int64 `json:"peak_rss_kib,omitempty"`
}

// recorder gathers the latencies and statuses of a run's goroutines.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	statuses  map[string]int
}

func (r *recorder) add(lat []time.Duration, statuses map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statuses == nil {
		r.statuses = map[string]int{}
	}
	r.latencies = append(r.latencies, lat...)
	for s, v := range statuses {
		r.statuses[s] += v
	}
}

// result sums the run up; statuses other than ok count as errors.
func (r *recorder) result(mode string, c config, elapsed time.Duration, ok ...string) *result {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
	}
	res := &result{Mode: mode, Servers: len(c.urls), Concurrency: c.concurrency, Requests: len(r.latencies),
		Seconds: elapsed.Seconds(), PerSecond: float64(len(r.latencies)) / elapsed.Seconds(),
		P50: pct(0.50), P99: pct(0.99), P999: pct(0.999), Statuses: map[string]int{}}
	for s, v := range r.statuses {
		res.Statuses[s] = v
		if !slices.Contains(ok, s) {
			res.Errors += v
		}
	}
	return res
}
