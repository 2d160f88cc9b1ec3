package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// The mx leg of the soak: a logical send every mxGap goes out through
// --transport mx, found through a real DNS server, to one of a few shaped
// destinations, each a smtptest exchanger on an address of its own in
// 127.0.0.0/8 (one port for all: --mx-port is one). The soak's shaping
// file gives them small limits; the exchangers defer (4xx) in windows of
// a schedule drawn from the leg's own stream, one of them enforces limits
// stricter than the file's (as a provider does), and every exchanger
// records what it took and its peaks. The other sends go to the sink
// through a mailbox whose relay is the sink's proxy, as before.

// mxGap is the least time between two sends of the mx leg: 8 a second
// at most, of which b (a third) gets under 3, below its exchanger's own
// 5 a second, and a (two thirds) under 6, below its file's 10.
const mxGap = 125 * time.Millisecond

// mxDest is one shaped destination: its domain, its exchanger's address,
// the shaping file's limits for it and the exchanger's own (0: none).
type mxDest struct {
	name, domain, ip string
	conns, perConn   int
	rate             float64
	strictConns      int
	strictRate       float64
}

// mxDests are the leg's destinations. a and c enforce nothing, so their
// peaks measure sendonce alone; b turns away a third connection (the
// file allows 3) and more than 5 messages a second (the file allows 8),
// as a provider stricter than the file would, which sendonce must take
// as slow-downs and still deliver everything once.
var mxDests = []mxDest{
	{name: "soak-a", domain: "a.shaped.soak.test", ip: "127.0.0.31", conns: 2, perConn: 3, rate: 10},
	{name: "soak-b", domain: "b.shaped.soak.test", ip: "127.0.0.32", conns: 3, perConn: 5, rate: 8, strictConns: 2, strictRate: 5},
	{name: "soak-c", domain: "c.shaped.soak.test", ip: "127.0.0.33", conns: 1, perConn: 4},
}

// mxRecipients are the recipients of logical send i, the leg's n-th: one
// destination, or (every third) two, a and c, each in its own handoff.
func mxRecipients(i int64, n int) []string {
	switch n % 3 {
	case 0:
		return []string{fmt.Sprintf("soak%d@%s", i%97, mxDests[0].domain)}
	case 1:
		return []string{fmt.Sprintf("soak%d@%s", i%97, mxDests[1].domain)}
	}
	return []string{fmt.Sprintf("soak%d@%s", i%97, mxDests[0].domain), fmt.Sprintf("soak%d@%s", i%97, mxDests[2].domain)}
}

// The kinds of the exchangers' deferral windows.
const (
	mxGreylist = "mx-greylist" // half the RCPTs answered 451 4.7.1 (a recipient's own deferral)
	mxData451  = "mx-data-451" // the end of DATA answered 451: not taken, deferred
	mxMail421  = "mx-mail-421" // MAIL answered 421 try again later: the destination pauses
	mxHangUp   = "mx-hangup"   // the exchanger hangs up after the data, not keeping it: unknown
)

// mxWindow is one deferral window at one destination.
type mxWindow struct {
	at, hold time.Duration
	kind     string
	dest     int
}

// drawMXWindows draws the leg's windows from g: a pause of 2–6 s before
// each, 1–3 s long, at one destination, the kinds in rounds (each kind
// once in every four windows). From a stream of its own, so the
// process and sink faults of a seed are the same as without the leg.
func drawMXWindows(g *rng, duration time.Duration) []mxWindow {
	kinds := &rounds{g: g, kinds: []string{mxGreylist, mxData451, mxMail421, mxHangUp}}
	var out []mxWindow
	for at := time.Duration(0); ; {
		at += g.between(2*time.Second, 6*time.Second)
		if at >= duration {
			return out
		}
		w := mxWindow{at: at, kind: kinds.next(), dest: g.intN(len(mxDests)), hold: g.between(time.Second, 3*time.Second)}
		out = append(out, w)
		at += w.hold
	}
}

// mxLeg is the running leg: the exchangers (by mxDests' order), the
// shaping file and the windows.
type mxLeg struct {
	servers []*smtptest.Server
	port    string
	shaping string
	windows []mxWindow
	rcptRNG *rng
	logger  *slog.Logger

	mu     sync.Mutex
	counts map[string]int // windows applied, by kind
}

// startMXLeg starts the exchangers with kit and writes the shaping file
// into dir. The DNS records that lead to them are mxRecords.
func startMXLeg(kit *kitT, seed uint64, dir string, duration time.Duration, logger *slog.Logger) (*mxLeg, error) {
	l := &mxLeg{rcptRNG: newStream(seed, "mx rcpt"), logger: logger, counts: map[string]int{},
		windows: drawMXWindows(newStream(seed, "mx schedule"), duration), shaping: filepath.Join(dir, "shaping.json")}
	err := kit.start(func() {
		for i, d := range mxDests {
			addr := d.ip + ":" + l.port
			if i == 0 {
				addr = d.ip + ":0"
			}
			s := smtptest.Start(kit, smtptest.Options{Addr: addr, MaxConns: d.strictConns, MaxRate: d.strictRate})
			l.port = s.Port
			l.servers = append(l.servers, s)
		}
	})
	if err != nil {
		return nil, err
	}
	return l, writeShaping(l.shaping)
}

// mxRecords are the DNS records of the shaped destinations.
func mxRecords() []string {
	var rs []string
	for _, d := range mxDests {
		rs = append(rs, fmt.Sprintf("%s. 300 IN MX 10 mx.%s.", d.domain, d.domain), fmt.Sprintf("mx.%s. 300 IN A %s", d.domain, d.ip))
	}
	return rs
}

// writeShaping writes the leg's shaping file. Its slow-down rules come
// before the shipped ones: a 421 pauses a destination for a second and
// not the shipped minute or half hour, so that a minute's soak still
// sees every destination recover; "too many concurrent connections"
// keeps the shipped action (the limit becomes what was open).
func writeShaping(path string) error {
	type rule struct {
		Name     string   `json:"name"`
		Domains  []string `json:"domains"`
		Conns    int      `json:"max_connections"`
		PerConn  int      `json:"max_messages_per_connection"`
		Rate     float64  `json:"max_messages_per_second,omitempty"`
		Idle     string   `json:"idle_timeout"`
		Interval string   `json:"recover_interval"`
	}
	var rules []rule
	for _, d := range mxDests {
		rules = append(rules, rule{Name: d.name, Domains: []string{d.domain}, Conns: d.conns, PerConn: d.perConn, Rate: d.rate,
			Idle: "5s", Interval: "5s"})
	}
	f := map[string]any{"rules": rules, "slow_down": []map[string]any{
		{"match": "too many (concurrent )?(smtp )?connections", "action": "connections"},
		{"match": ".", "codes": []int{421}, "action": "pause", "for": "1s"},
	}}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// args are the processes' flags for the leg.
func (l *mxLeg) args() []string {
	return []string{"--mx-port", l.port, "--outbound-allow", "127.0.0.0/8", "--shaping", l.shaping,
		// Under mx a deferred recipient is retried until the queue
		// lifetime, the waits doubling up to this: a send deferred in
		// several windows must still go out before the soak settles.
		"--max-retry-delay", "5s"}
}

// run applies the windows, each at its time after start, until ctx ends.
func (l *mxLeg) run(ctx context.Context, start time.Time) {
	for _, w := range l.windows {
		if !lifecycle.Sleep(ctx, time.Until(start.Add(w.at))) {
			return
		}
		s := l.servers[w.dest]
		s.SetBehaviour(l.behaviour(w.kind))
		l.logger.Info("mx window", slog.String("kind", w.kind), slog.String("dest", mxDests[w.dest].domain), slog.Duration("for", w.hold))
		lifecycle.Sleep(ctx, time.Until(start.Add(w.at+w.hold)))
		s.SetBehaviour(smtptest.Behaviour{})
		l.mu.Lock()
		l.counts[w.kind]++
		l.mu.Unlock()
	}
}

// heal ends every window.
func (l *mxLeg) heal() {
	for _, s := range l.servers {
		s.SetBehaviour(smtptest.Behaviour{})
	}
}

func (l *mxLeg) behaviour(kind string) smtptest.Behaviour {
	switch kind {
	case mxGreylist:
		return smtptest.Behaviour{RcptFunc: func(_, _, _ string) *smtp.SMTPError {
			if l.rcptRNG.chance(500) {
				return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, please try again"}
			}
			return nil
		}}
	case mxData451:
		return smtptest.Behaviour{DataErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local problem"}}
	case mxMail421:
		return smtptest.Behaviour{MailErr: &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Service busy, try again later"}}
	default:
		return smtptest.Behaviour{HangUpAfterData: true}
	}
}

func (l *mxLeg) windowCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts)
}

// startDNS starts the soak's resolver: the shaped destinations' records
// when the mx leg runs, NXDOMAIN for every other name (the receiving
// leg's SPF and DMARC look-ups then end at once).
func startDNS(kit *kitT, records []string) (string, error) {
	var s *dnstest.Server
	err := kit.start(func() { s = dnstest.Start(kit, records...) })
	if err != nil {
		return "", err
	}
	return s.Addr(), nil
}
