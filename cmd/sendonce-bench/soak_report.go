package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// soakReport is what a soak prints (and writes with --json).
type soakReport struct {
	Database  string         `json:"database"`
	Provider  string         `json:"provider,omitempty"` // ses: the provider soak
	Seed      uint64         `json:"seed"`
	Duration  string         `json:"duration"`
	Started   string         `json:"started"` // the times of the histories and the sink count from here
	Processes []string       `json:"processes"`
	Keys      int            `json:"keys"`
	Acked     int            `json:"acknowledged"`
	Requests  map[string]int `json:"requests"`
	Faults    map[string]int `json:"faults"`
	Statuses  map[string]int `json:"send_statuses"`
	AtSink    int            `json:"messages_at_sink"`
	// Applied is every fault as applied; MaxFaultLate the most one began
	// after its time in the schedule.
	Applied      []string      `json:"faults_applied"`
	MaxFaultLate time.Duration `json:"max_fault_late_ns"`
	// The violations, each a count; Findings has the histories.
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	Stuck      int `json:"stuck"`
	SentNotAt  int `json:"sent_not_at_sink"`
	Other      int `json:"other_violations"`
	Races      int `json:"data_races"` // reported by race-enabled processes
	// ServerErrors counts the clients' answers 500 and any other 5xx but
	// 503: a database that cannot be reached is a 503 with Retry-After
	// (nothing stored), and every other 5xx is a defect, never an
	// ordinary answer to retry.
	ServerErrors int `json:"server_errors"`
	// The unknown sends: whose message the sink kept once; whose DATA
	// began but the sink did not keep it (it hung up); whose attempts
	// never reached DATA at the sink (the ones unknown should not be);
	// and kept twice (the reconcile case; not a violation, counted apart).
	UnknownAtSink        int `json:"unknown_at_sink"`
	UnknownLostAfterData int `json:"unknown_data_began_not_kept"`
	UnknownNeverLeft     int `json:"unknown_never_reached_data"`
	UnknownTwice         int `json:"unknown_delivered_twice"`
	// Received is the receiving leg's figures; ReceivedTwice and
	// ReceivedLost its violations (a message stored twice; one a sender
	// heard accepted and that is not stored).
	Received      receiveFigures `json:"received"`
	ReceivedTwice int            `json:"received_twice"`
	ReceivedLost  int            `json:"received_lost"`
	// MX is the mx leg's figures; PastShaping its destinations whose
	// exchanger saw more than the shaping file allows (its duplicates,
	// stuck and lost recipients count with the sends' above).
	MX          mxFigures `json:"mx"`
	PastShaping int       `json:"past_shaping"`
	// Webhooks is the webhook leg's figures; WebhookLost its events not
	// delivered, WebhookMismatch its deliveries under the wrong
	// webhook-id, with other bytes, or unsigned.
	Webhooks        hookFigures `json:"webhooks"`
	WebhookLost     int         `json:"webhook_lost"`
	WebhookMismatch int         `json:"webhook_mismatch"`
	Findings        []string    `json:"findings,omitempty"`
	// Floors is the least the soak had to do; BelowFloor what fell short.
	Floors     soakFloors `json:"floors"`
	BelowFloor []string   `json:"below_floor,omitempty"`
}

func (r *soakReport) violations() int {
	return r.Duplicates + r.Lost + r.Stuck + r.SentNotAt + r.Other + r.Races + r.ServerErrors + r.ReceivedTwice + r.ReceivedLost +
		r.PastShaping + r.WebhookLost + r.WebhookMismatch
}

// countServerErrors sets ServerErrors from Requests (answers by status).
func (r *soakReport) countServerErrors() {
	r.ServerErrors = 0
	for label, n := range r.Requests {
		if st, err := strconv.Atoi(label); err == nil && st >= 500 && st != http.StatusServiceUnavailable {
			r.ServerErrors += n
		}
	}
}

// soakFloors is the least a soak must do to count. A soak whose clients
// were never answered 200, whose sink took nothing or that injected no
// fault checked nothing, and must not pass for one that did.
type soakFloors struct {
	Acked  int `json:"acknowledged"`
	AtSink int `json:"messages_at_sink"`
	Faults int `json:"faults"`
	// Received is the least of received messages accepted (the
	// receiving leg); 0 asks nothing.
	Received int `json:"received_accepted"`
	// MXDelivered is the least of the mx leg's recipients delivered, and
	// WebhookEvents of the webhook leg's events delivered; 0 asks nothing
	// (the leg may be off).
	MXDelivered   int `json:"mx_delivered"`
	WebhookEvents int `json:"webhook_events"`
}

// judgeFloors notes in r.BelowFloor each figure below its floor.
func (r *soakReport) judgeFloors(f soakFloors) {
	r.Floors = f
	faults := 0
	for _, n := range r.Faults {
		faults += n
	}
	for _, c := range []struct {
		what       string
		got, floor int
	}{{"acknowledged sends", r.Acked, f.Acked}, {"messages at the sink", r.AtSink, f.AtSink}, {"faults applied", faults, f.Faults},
		{"received messages accepted", r.Received.Accepted, f.Received}, {"mx recipients delivered", r.MX.Delivered, f.MXDelivered},
		{"webhook events delivered", r.Webhooks.Delivered, f.WebhookEvents}} {
		if c.got < c.floor {
			r.BelowFloor = append(r.BelowFloor, fmt.Sprintf("%s %d < %d", c.what, c.got, c.floor))
		}
	}
}

// reportSoak prints the report (and writes it as JSON to jsonFile, if
// set); it returns an error when a check found violations or the soak did
// less than its floors.
func reportSoak(c soakConfig, rep *soakReport, jsonFile string, stdout io.Writer) error {
	rep.judgeFloors(c.floors)
	printSoak(stdout, rep)
	if jsonFile != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := writeFile(jsonFile, stdout, append(b, '\n')); err != nil {
			return err
		}
	}
	if n := rep.violations(); n > 0 {
		return fmt.Errorf("soak: %d violations (seed %d; logs in %s)", n, c.seed, c.dir)
	}
	if len(rep.BelowFloor) > 0 {
		return fmt.Errorf("soak: too little happened to count: %s (seed %d; requests %v; logs in %s)",
			strings.Join(rep.BelowFloor, ", "), c.seed, rep.Requests, c.dir)
	}
	return nil
}

func writeFile(file string, stdout io.Writer, b []byte) error {
	if file == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func printSoak(w io.Writer, r *soakReport) {
	sorted := func(m map[string]int) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
		return strings.Join(parts, " ")
	}
	on := r.Database
	if r.Provider != "" {
		// The sink below is SES (the emulator's store), and "DATA" its
		// SendEmail request.
		on += " handing to " + r.Provider
	}
	fmt.Fprintf(w, "soak on %s, seed %d, %s from %s, processes %s\n", on, r.Seed, r.Duration, r.Started, strings.Join(r.Processes, ","))
	fmt.Fprintf(w, "keys:       %d logical sends, %d acknowledged (200)\n", r.Keys, r.Acked)
	fmt.Fprintf(w, "requests:   %s\n", sorted(r.Requests))
	fmt.Fprintf(w, "faults:     %s (the latest began %.1fs after its time)\n", sorted(r.Faults), r.MaxFaultLate.Seconds())
	fmt.Fprintf(w, "sends:      %s; %d messages at the sink\n", sorted(r.Statuses), r.AtSink)
	fmt.Fprintf(w, "unknown:    %d kept by the sink, %d began DATA but not kept, %d never reached DATA, %d delivered twice (reconcile case)\n",
		r.UnknownAtSink, r.UnknownLostAfterData, r.UnknownNeverLeft, r.UnknownTwice)
	floors := "met"
	if len(r.BelowFloor) > 0 {
		floors = "NOT MET: " + strings.Join(r.BelowFloor, ", ")
	}
	fmt.Fprintf(w, "floors:     acknowledged >= %d, at the sink >= %d, faults >= %d, received >= %d, mx delivered >= %d, webhook events >= %d: %s\n",
		r.Floors.Acked, r.Floors.AtSink, r.Floors.Faults, r.Floors.Received, r.Floors.MXDelivered, r.Floors.WebhookEvents, floors)
	fmt.Fprintf(w, "received:   %d messages, %d accepted, %d stored; %d deliveries, %d of them again, %d replies dropped\n",
		r.Received.Messages, r.Received.Accepted, r.Received.Stored, r.Received.Tries, r.Received.Retries, r.Received.RepliesDropped)
	printLegs(w, r, sorted)
	fmt.Fprintf(w, "violations: duplicates=%d lost=%d stuck=%d sent-not-at-sink=%d other=%d races=%d server-errors=%d received-twice=%d received-lost=%d "+
		"past-shaping=%d webhook-lost=%d webhook-mismatch=%d\n",
		r.Duplicates, r.Lost, r.Stuck, r.SentNotAt, r.Other, r.Races, r.ServerErrors, r.ReceivedTwice, r.ReceivedLost,
		r.PastShaping, r.WebhookLost, r.WebhookMismatch)
	for _, f := range r.Findings {
		fmt.Fprintln(w, "  "+f)
	}
	if r.violations() > 0 || len(r.BelowFloor) > 0 {
		// The faults beside the findings' histories: all times count from
		// the start above.
		for _, a := range r.Applied {
			fmt.Fprintln(w, "  "+a)
		}
	}
}

// printLegs prints the mx and webhook legs' figures, when they ran.
func printLegs(w io.Writer, r *soakReport, sorted func(map[string]int) string) {
	if r.MX.Sends > 0 || len(r.MX.Peaks) > 0 {
		fmt.Fprintf(w, "mx:         %d sends, %d recipients: %d delivered, %d unknown (%d of them at the exchanger); windows %s\n",
			r.MX.Sends, r.MX.Recipients, r.MX.Delivered, r.MX.Unknown, r.MX.UnknownTaken, sorted(r.MX.Windows))
		for _, p := range r.MX.Peaks {
			fmt.Fprintf(w, "  %s: %d messages over %d connections; peak %d at once (limit %d), %d on one (limit %d); %d refused, %d throttled\n",
				p.Domain, p.Messages, p.Connections, p.PeakConns, p.LimitConns, p.PeakPerConn, p.LimitPer, p.Refused, p.Throttled)
		}
	}
	if h := r.Webhooks; h.Events > 0 || len(h.Windows) > 0 {
		fmt.Fprintf(w, "webhooks:   %d events, %d delivered (%d more than once), %d still pending while the backlog shrank (after %d s); %d signed attempts, answered %s; windows %s\n",
			h.Events, h.Delivered, h.Redelivered, h.Backlog, h.DrainSeconds, h.Attempts, sorted(h.Answered), sorted(h.Windows))
	}
}
