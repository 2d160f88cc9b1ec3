package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/lifecycle"
)

// maxFindings bounds how many offending histories a report lists.
const maxFindings = 30

type soakSend struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	// Recipients are the send's recipients with their own status (the
	// mx leg judges each).
	Recipients []soakRecipient `json:"recipients"`
}

// check waits (bounded) until no send is queued or sending, then checks
// every logical send against the database (over the API) and the sink
// (or SES's store when the provider soak runs, and the exchangers for the
// mx leg's sends), then the receiving and webhook legs.
func check(ctx context.Context, c soakConfig, cl *clients, lg soakLegs, rep *soakReport, logger *slog.Logger) error {
	api := &soakAPI{cl: cl, hc: &http.Client{Timeout: 10 * time.Second}}
	if err := awaitQuiescence(ctx, api, c.settle, logger); err != nil {
		return err
	}
	all := cl.logicals()
	rep.Keys, rep.Statuses = len(all), map[string]int{}
	k := &soakChecker{api: api, rep: rep, seen: map[string]bool{}}
	noID := 0
	if lg.ses != nil {
		var err error
		if k.sink, rep.AtSink, err = lg.ses.view(ctx); err != nil {
			return err
		}
	} else {
		k.sink.ids, k.sink.began = lg.sk.idCounts()
		k.sink.story = lg.sk.story
		for _, n := range k.sink.ids {
			rep.AtSink += n
		}
		noID = lg.sk.withoutID()
	}
	if lg.mx != nil {
		mv := lg.mx.view()
		k.sink.mx = &mv
	}
	if err := k.judgeAll(ctx, all); err != nil {
		return err
	}
	k.countOrphans(noID)
	if lg.mx != nil {
		countMXOrphans(*k.sink.mx, k.seen, rep)
		rep.MX.Peaks = lg.mx.peaks(c.deliverers())
		judgePeaks(rep.MX.Peaks, rep)
	}
	if err := lg.rl.judge(ctx, api, rep, logger); err != nil {
		return err
	}
	if lg.hook != nil {
		if err := lg.hook.judge(ctx, api, c.hookDrain, rep, logger); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// soakAPI reads the soak's sends over the API of any process that is up.
type soakAPI struct {
	cl *clients
	hc *http.Client
}

// get decodes the JSON answer to GET path into v; any status but 200 is
// an error (a *statusError).
func (a *soakAPI) get(ctx context.Context, path string, v any) error {
	base := a.cl.anyURL()
	if base == "" {
		return errNoAPI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.cl.apiKey)
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &statusError{path: path, code: resp.StatusCode, body: string(b)}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(v)
}

// statusError is an answer other than 200 to a lookup.
type statusError struct {
	path string
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %d %s", e.path, e.code, e.body) }

// lookupTries bounds the tries of one lookup, and lookupBackoff is the
// pause after the first failed one, doubled after each (up to
// lookupMaxPause): on a loaded machine, with race-enabled processes, a
// lookup can time out or meet a 503 while the database is slow, and one
// such miss must not fail the whole check. In all about 20 s of pauses.
const (
	lookupTries    = 8
	lookupBackoff  = 250 * time.Millisecond
	lookupMaxPause = 5 * time.Second
)

// getRetrying is get, tried again with backoff after an error that may
// pass: no answer, no process up, 5xx, 409 or 429. A 4xx other than those
// says the lookup itself is wrong, and is not tried again.
func (a *soakAPI) getRetrying(ctx context.Context, path string, v any) error {
	pause := lookupBackoff
	for try := 1; ; try++ {
		err := a.get(ctx, path, v)
		var se *statusError
		final := errors.As(err, &se) && se.code < 500 && se.code != http.StatusConflict && se.code != http.StatusTooManyRequests
		if err == nil || final || ctx.Err() != nil {
			return err
		}
		if try == lookupTries {
			return fmt.Errorf("%d tries: %w", try, err)
		}
		lifecycle.Sleep(ctx, pause)
		pause = min(2*pause, lookupMaxPause)
	}
}

// sendsFor returns the sends of one Idempotency-Key.
func (a *soakAPI) sendsFor(ctx context.Context, key string) ([]soakSend, error) {
	var list struct{ Data []soakSend }
	err := a.getRetrying(ctx, "/v1/sends?limit=100&idempotency_key="+url.QueryEscape(key), &list)
	return list.Data, err
}

// awaitQuiescence waits until nothing is queued or sending any more, or
// settle has passed (then the checks run anyway, and find the stuck).
func awaitQuiescence(ctx context.Context, api *soakAPI, settle time.Duration, logger *slog.Logger) error {
	deadline := time.Now().Add(settle)
	for {
		busy := 0
		var err error
		for _, st := range []string{"queued", "sending"} {
			var list struct{ Data []soakSend }
			if err = api.getRetrying(ctx, "/v1/sends?limit=100&status="+st, &list); err != nil {
				break
			}
			busy += len(list.Data)
		}
		if err == nil && busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			logger.Warn("no quiescence before the bound; checking anyway", slog.Duration("settle", settle), slog.Any("error", err))
			return nil
		}
		if !lifecycle.Sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// soakChecker judges the logical sends into rep, several at once.
type soakChecker struct {
	api  *soakAPI
	rep  *soakReport
	sink sinkView

	mu   sync.Mutex      // guards rep, seen and the logicals' judging
	seen map[string]bool // Message-IDs of the sends found
}

// judgeAll looks every logical send up and judges it, 8 lookups at a
// time; it fails when a lookup kept failing.
func (k *soakChecker) judgeAll(ctx context.Context, all []*logical) error {
	fails := eachIndex(ctx, 8, len(all), func(_, i int) error {
		sends, err := k.api.sendsFor(ctx, all[i].key)
		if err != nil {
			return fmt.Errorf("key %s: %w", all[i].key, err)
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		judge(all[i], sends, k.sink, k.seen, k.rep, k.finding)
		return nil
	})
	if len(fails) > 0 {
		return fmt.Errorf("soak: look sends up: %w", fails[0])
	}
	return nil
}

// finding records one offending history, up to maxFindings.
func (k *soakChecker) finding(kind string, l *logical, what string) {
	if len(k.rep.Findings) < maxFindings {
		k.rep.Findings = append(k.rep.Findings, fmt.Sprintf("%s: %s; %s", kind, what, l.history()))
	}
}

// countOrphans counts the messages at the sink that belong to no send,
// those without a Message-ID (noID) among them.
func (k *soakChecker) countOrphans(noID int) {
	if noID > 0 {
		k.rep.Other += noID
		k.rep.Findings = append(k.rep.Findings, fmt.Sprintf("orphan: %d messages at the sink carried no Message-ID", noID))
	}
	for id, n := range k.sink.ids {
		if !k.seen[id] {
			k.rep.Other++
			if len(k.rep.Findings) < maxFindings {
				k.rep.Findings = append(k.rep.Findings, fmt.Sprintf("orphan: Message-ID %s at the sink %d times belongs to no send", id, n))
			}
		}
	}
}

// sinkView is what the sink saw, per Message-ID: messages kept, DATA
// begun, and (story, optional) every transaction's time, fate and
// session, for the findings. With provider the keys are the logical
// sends' subjects and the counts SES's copies (both maps the same).
type sinkView struct {
	ids, began map[string]int
	story      func(messageID string) string
	provider   bool
	// mx is what the mx leg's exchangers took (nil without the leg).
	mx *mxView
}

// judge checks one logical send: its sends in the database and their
// messages at the sink. It runs under check's lock.
func judge(l *logical, sends []soakSend, sv sinkView, seen map[string]bool, rep *soakReport, finding func(string, *logical, string)) {
	ids, began := sv.ids, sv.began
	l.mu.Lock()
	acked, sendID, bodies := l.sendID != "", l.sendID, len(l.bodies)
	l.mu.Unlock()
	if acked {
		rep.Acked++
	}
	switch {
	case acked && len(sends) == 0:
		rep.Lost++
		finding("lost", l, "answered 200, no send in the database")
	case len(sends) > 1:
		rep.Duplicates += len(sends) - 1
		finding("duplicate send", l, fmt.Sprintf("%d sends for one key", len(sends)))
	case acked && sends[0].ID != sendID:
		rep.Other++
		finding("send id", l, fmt.Sprintf("answered %s, the database has %s", sendID, sends[0].ID))
	}
	if bodies > 1 {
		rep.Other++
		finding("replay", l, fmt.Sprintf("%d different 200 bodies", bodies))
	}
	for _, s := range sends {
		id := strings.Trim(s.MessageID, "<>")
		if l.mx && sv.mx != nil {
			seen[id] = true
			judgeMX(l, s, *sv.mx, rep, finding)
			continue
		}
		if sv.provider {
			id = l.subject
		}
		seen[id] = true
		n := ids[id]
		rep.Statuses[s.Status]++
		what := fmt.Sprintf("send %s %s (attempts %d, last error %q), %d at the sink", s.ID, s.Status, s.Attempts, s.LastError, n)
		if sv.story != nil {
			what += "; the sink saw: " + sv.story(id)
		}
		judgeStatus(l, s, n, began[id], sv.provider, acked, what, rep, finding)
		if n > 1 && s.Status != "unknown" {
			rep.Duplicates += n - 1
			kind := "Message-ID delivered twice"
			if sv.provider {
				kind = "at SES more than once"
			}
			finding(kind, l, what)
		}
	}
}

// judgeStatus checks one send's status against what the sink saw of it
// (n copies kept; began: DATA begun there).
func judgeStatus(l *logical, s soakSend, n, began int, provider, acked bool, what string, rep *soakReport, finding func(string, *logical, string)) {
	switch s.Status {
	case "queued", "sending":
		rep.Stuck++
		finding("stuck", l, what)
	case "unknown":
		switch {
		case n == 0 && began == 0:
			rep.UnknownNeverLeft++
		case n == 0:
			rep.UnknownLostAfterData++
		case n == 1:
			rep.UnknownAtSink++
		case provider:
			// SES has no idempotency key: an unknown send is never
			// asked again, so a second copy is a resend.
			rep.Duplicates += n - 1
			finding("unknown, at SES twice", l, what)
		default:
			rep.UnknownTwice++
			finding("unknown, delivered twice (reconcile case)", l, what)
		}
		if provider && s.LastError == "" {
			rep.Other++
			finding("unknown without an explanation", l, what)
		}
	case "sent", "delivered":
		if n == 0 {
			rep.SentNotAt++
			finding("sent, not at the sink", l, what)
		}
	default:
		if provider && acked && s.Status != "delivered" {
			// The provider soak's faults leave a message taken,
			// unknown or retried, never refused for good.
			rep.Lost++
			finding("accepted, then "+s.Status, l, what)
		} else if n > 0 {
			// failed (550 or attempts spent): no attempt may have
			// handed the message over before.
			rep.Other++
			finding("at the sink, yet "+s.Status, l, what)
		}
	}
}
