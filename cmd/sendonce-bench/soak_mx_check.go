package main

import (
	"fmt"
	"strings"
)

// The mx leg's checks. Per recipient of each send that went through mx:
// its message at its destination's exchanger at most once (by Message-ID
// and recipient: an unknown handoff is never made again by itself, so
// twice is a duplicate whatever the status); delivered means there once;
// at the end no recipient is still waiting (queued, delayed or sending);
// a failed or bounced one was never taken. Per destination: the
// exchanger's peaks within the shaping file's limits.

// mxView is what the exchangers took: copies by Message-ID and recipient,
// and by Message-ID alone (for the orphans).
type mxView struct {
	byRcpt map[string]int
	byID   map[string]int
}

func mxKey(messageID, rcpt string) string { return messageID + "\x00" + strings.ToLower(rcpt) }

// view reads the exchangers' records.
func (l *mxLeg) view() mxView {
	v := mxView{byRcpt: map[string]int{}, byID: map[string]int{}}
	for _, s := range l.servers {
		for _, m := range s.Messages() {
			v.byID[m.MessageID]++
			for _, to := range m.To {
				v.byRcpt[mxKey(m.MessageID, to)]++
			}
		}
	}
	return v
}

// soakRecipient is one recipient of a send as the API shows it.
type soakRecipient struct {
	Email  string `json:"email"`
	Status string `json:"status"`
}

// judgeMX checks one send of the mx leg against the exchangers' records,
// recipient by recipient, into rep. It runs under check's lock.
func judgeMX(l *logical, s soakSend, mv mxView, rep *soakReport, finding func(string, *logical, string)) {
	id := strings.Trim(s.MessageID, "<>")
	rep.Statuses[s.Status]++
	rep.MX.Sends++
	for _, r := range s.Recipients {
		n := mv.byRcpt[mxKey(id, r.Email)]
		rep.MX.Recipients++
		what := fmt.Sprintf("send %s %s, recipient %s %s (attempts %d, last error %q), %d at its exchanger",
			s.ID, s.Status, r.Email, r.Status, s.Attempts, s.LastError, n)
		if n > 1 {
			rep.Duplicates += n - 1
			finding("mx: delivered twice to one recipient", l, what)
		}
		switch r.Status {
		case "delivered", "sent":
			rep.MX.Delivered++
			if n == 0 {
				rep.SentNotAt++
				finding("mx: delivered, not at the exchanger", l, what)
			}
		case "unknown":
			rep.MX.Unknown++
			if n == 1 {
				rep.MX.UnknownTaken++
			}
		case "queued", "sending", "delivery_delayed", "scheduled":
			rep.Stuck++
			finding("mx: stuck", l, what)
		default:
			// failed or bounced: the leg's exchangers refuse nothing for
			// good, and what they took must not read as refused.
			rep.Other++
			finding("mx: recipient "+r.Status, l, what)
		}
	}
	if len(s.Recipients) == 0 {
		rep.Other++
		finding("mx: no recipients shown", l, fmt.Sprintf("send %s %s", s.ID, s.Status))
	}
}

// mxPeaks is what one exchanger saw at its busiest.
type mxPeaks struct {
	Domain      string `json:"domain"`
	Messages    int    `json:"messages"`
	Connections int    `json:"connections"`
	PeakConns   int    `json:"peak_connections"`
	LimitConns  int    `json:"limit_connections"` // the file's, times the delivering processes
	PeakPerConn int    `json:"peak_messages_per_connection"`
	LimitPer    int    `json:"limit_messages_per_connection"`
	Refused     int    `json:"refused"`   // turned away past the exchanger's own connection limit
	Throttled   int    `json:"throttled"` // MAILs answered 421 past its own rate
}

// peaks reads each exchanger's peaks beside its limits. Shaping is per
// process, so with workers processes delivering a destination may see up
// to workers times the file's connections (docs/deliverability.md); the
// messages a connection are one process's own.
func (l *mxLeg) peaks(workers int) []mxPeaks {
	var out []mxPeaks
	for i, s := range l.servers {
		d := mxDests[i]
		out = append(out, mxPeaks{Domain: d.domain, Messages: len(s.Messages()), Connections: s.Connections(),
			PeakConns: s.PeakConnections(), LimitConns: d.conns * workers, PeakPerConn: s.PeakMessagesPerConn(), LimitPer: d.perConn,
			Refused: s.Refused(), Throttled: s.Throttled()})
	}
	return out
}

// judgePeaks counts each destination whose exchanger saw more than its
// shaping limits allow.
func judgePeaks(ps []mxPeaks, rep *soakReport) {
	for _, p := range ps {
		if p.PeakConns > p.LimitConns {
			rep.PastShaping++
			rep.Findings = append(rep.Findings, fmt.Sprintf("mx: %s saw %d connections at once, past the shaping limit %d", p.Domain, p.PeakConns, p.LimitConns))
		}
		if p.PeakPerConn > p.LimitPer {
			rep.PastShaping++
			rep.Findings = append(rep.Findings, fmt.Sprintf("mx: %s took %d messages on one connection, past the shaping limit %d", p.Domain, p.PeakPerConn, p.LimitPer))
		}
	}
}

// countMXOrphans counts messages at the exchangers that belong to no send
// of the leg (seen holds the Message-IDs of the sends found).
func countMXOrphans(mv mxView, seen map[string]bool, rep *soakReport) {
	for id, n := range mv.byID {
		if !seen[id] {
			rep.Other++
			if len(rep.Findings) < maxFindings {
				rep.Findings = append(rep.Findings, fmt.Sprintf("mx orphan: Message-ID %q at an exchanger %d times belongs to no send", id, n))
			}
		}
	}
}

// mxFigures are the leg's figures in the report.
type mxFigures struct {
	Sends        int            `json:"sends"`
	Recipients   int            `json:"recipients"`
	Delivered    int            `json:"delivered"`
	Unknown      int            `json:"unknown"`
	UnknownTaken int            `json:"unknown_at_exchanger"`
	Windows      map[string]int `json:"windows"`
	Peaks        []mxPeaks      `json:"destinations"`
}
