package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

// The fault kinds of the provider soak (--soak-provider ses): each strikes
// half of SES SendEmail requests for its window, at the HTTP fault proxy
// between sendonce and the emulator. Every one but ses-down lets the
// emulator take the message first, so the send is only safe if sendonce
// treats the lost answer as unknown and never asks SES again.
const (
	faultSESDrop  = "ses-drop"        // SES takes it; the answer is swallowed, the connection closed
	faultSESReset = "ses-reset"       // SES takes it; the connection is reset instead of the answer
	faultSES503   = "ses-503-after"   // SES takes it; a gateway answers 503
	faultSESLate  = "ses-late"        // SES takes it; the answer comes after the attempt gave up
	faultSESDown  = "ses-unavailable" // a gateway answers 503 without passing the request on
)

// sesSendPath is SES v2 SendEmail's route.
const sesSendPath = "/v2/email/outbound-emails"

// sesLate is how long ses-late holds an answer: longer than the soak's
// attempt lease, so that the attempt has given up when it comes.
const sesLate = 5 * time.Second

// sesLeg is the provider soak's SES: the npm emulator behind the HTTP
// fault proxy, whose plan draws each request's fate while a fault is on.
type sesLeg struct {
	emu     *seslocal.Emulator
	stopEmu func()
	px      *faultproxy.Proxy
	rng     *rng

	mu   sync.Mutex
	mode faultproxy.Fault
	p    int32 // 1/1000 of requests that get mode
}

// startSESLeg starts the emulator and its proxy.
func startSESLeg(seed uint64) (*sesLeg, error) {
	if err := seslocal.Installed(); err != nil {
		return nil, fmt.Errorf("--soak-provider ses needs node and `npm ci --prefix internal/testkit/seslocal/testdata/ses-local`: %w", err)
	}
	emu, stop, err := seslocal.Run()
	if err != nil {
		return nil, err
	}
	l := &sesLeg{emu: emu, stopEmu: stop, rng: newStream(seed, "ses proxy")}
	l.px, err = faultproxy.New(faultproxy.Options{Upstream: emu.URL, Delay: sesLate, Plan: l.plan})
	if err != nil {
		stop()
		return nil, err
	}
	return l, nil
}

func (l *sesLeg) close() {
	l.px.Close()
	l.stopEmu()
}

// transport is the --transport of the soak's processes: fixed made-up
// credentials (the emulator checks none), the proxy as SES's endpoint.
func (l *sesLeg) transport() string {
	return "ses://AKIDSOAK:soak-secret@eu-west-1?endpoint=" + l.px.URL
}

// plan draws one request's fate (it runs under the proxy's lock).
func (l *sesLeg) plan(r faultproxy.Request) faultproxy.Fault {
	if r.Method != http.MethodPost || r.Path != sesSendPath {
		return faultproxy.Pass
	}
	l.mu.Lock()
	mode, p := l.mode, l.p
	l.mu.Unlock()
	if p == 0 || !l.rng.chance(p) {
		return faultproxy.Pass
	}
	return mode
}

// set turns a fault on for half the requests, or off (Pass).
func (l *sesLeg) set(mode faultproxy.Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode, l.p = mode, 500
	if mode == faultproxy.Pass {
		l.p = 0
	}
}

// sesFaults maps the fault kinds to the proxy's faults.
var sesFaults = map[string]faultproxy.Fault{
	faultSESDrop: faultproxy.Drop, faultSESReset: faultproxy.ResetAfter, faultSES503: faultproxy.UnavailableAfter,
	faultSESLate: faultproxy.Delay, faultSESDown: faultproxy.Unavailable,
}

// providerFaultKinds are the faults of a provider soak: the processes'
// (and on PostgreSQL the database's) and SES's, no SMTP sink's.
func providerFaultKinds(pg bool) []string {
	kinds := []string{faultKill, faultStop, faultSESDrop, faultSESReset, faultSES503, faultSESLate, faultSESDown}
	if pg {
		kinds = append(kinds, faultPGCut)
	}
	return kinds
}

// view is what SES holds, for the checks: the count of each subject (the
// emulator keeps no headers or tags, and each logical send's subject is
// its own), keyed like the sink's Message-IDs.
func (l *sesLeg) view(ctx context.Context) (sinkView, int, error) {
	var (
		emails []seslocal.Email
		err    error
	)
	// The emulator is local and idle by now; a few tries cover a slow moment.
	for try := 1; try <= 5; try++ {
		if emails, err = l.emu.Store(ctx); err == nil || ctx.Err() != nil {
			break
		}
		lifecycle.Sleep(ctx, time.Second)
	}
	if err != nil {
		return sinkView{}, 0, err
	}
	counts := map[string]int{}
	for _, e := range emails {
		counts[e.Subject]++
	}
	return sinkView{ids: counts, began: counts, provider: true}, len(emails), nil
}
