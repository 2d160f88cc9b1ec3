package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// Provider transports (ses://, resend://) and failover (--fallback-transport),
// API contract section 15. A send's chain is its mailbox's transport alone,
// or the server's --transport followed by its fallbacks. The next
// transport is tried only when the one before it definitely did not take
// the message (transport.Definite): an outcome that may have handed it
// over stops the chain, so failover can never make a second copy.
//
// A provider whose answer was lost pins the send to itself (send_providers,
// no message id): later attempts go to that transport only — Resend with
// the same Idempotency-Key, which answers the first email — and never to
// another.

// ResendKeyLifetime is how long after its first attempt a send pinned to
// Resend is retried with its key: Resend keeps keys 24 hours, so past
// this a retry could make a second email, and the send becomes unknown.
const ResendKeyLifetime = 23 * time.Hour

// link is one transport of a send's chain.
type link struct {
	url    string
	spec   transport.Spec
	name   string // the URL redacted: what the history and the pin record
	tenant bool   // set on a mailbox: dials through the outbound policy
}

// providerPool keeps one provider transport per URL.
type providerPool struct {
	mu sync.Mutex
	m  map[string]transport.Provider
}

// maxTenantProviders bounds the providers tenants' mailboxes made; past
// it the pool forgets theirs (a provider holds nothing but idle
// connections).
const maxTenantProviders = 256

func (d *Deliverer) provider(l link) transport.Provider {
	p := &d.providers
	key := l.url
	if l.tenant {
		key = "tenant\x00" + l.url
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]transport.Provider{}
	}
	if t, ok := p.m[key]; ok {
		return t
	}
	if len(p.m) >= maxTenantProviders {
		p.m = map[string]transport.Provider{}
	}
	var t transport.Provider
	switch l.spec.Kind {
	case transport.SESKind:
		c := l.spec.SES
		if l.tenant {
			c.DialContext = d.svc.Outbound().DialContext
		}
		c.TLSConfig = d.cfg.ProviderTLS
		t = transport.NewSES(c)
	default:
		c := l.spec.Resend
		if l.tenant {
			c.DialContext = d.svc.Outbound().DialContext
		}
		c.TLSConfig = d.cfg.ProviderTLS
		t = transport.NewResend(c)
	}
	p.m[key] = t
	return t
}

// chainOf is the send's chain of transports.
func (d *Deliverer) chainOf(ctx context.Context, s *core.Send) ([]link, error) {
	mb, err := d.svc.Mailbox(ctx, s.Tenant, s.MailboxID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	urls, tenant := append([]string{d.cfg.DefaultTransport}, d.cfg.Fallbacks...), false
	if mb != nil && mb.Transport != "" {
		urls, tenant = []string{mb.Transport}, true
	}
	out := make([]link, 0, len(urls))
	for _, u := range urls {
		spec, err := transport.ParseSpec(u)
		if err != nil {
			return nil, err
		}
		out = append(out, link{url: u, spec: spec, name: spec.Redacted(), tenant: tenant})
	}
	return out, nil
}

func isProvider(k transport.Kind) bool { return k == transport.SESKind || k == transport.ResendKind }

// handOverChain hands the message over when the send's chain has a
// provider or a fallback; ok is false when it is one plain transport
// (capture, mx, a relay), which handOver's own path takes.
func (d *Deliverer) handOverChain(ctx context.Context, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte) (h handoff, ok bool) {
	links, err := d.chainOf(ctx, s)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}}, true
	}
	if len(links) == 1 && !isProvider(links[0].spec.Kind) {
		return handoff{}, false
	}
	// Before a pin narrows the chain: a send pinned to a provider after
	// its mx link handed some recipients over must not send to them again.
	linkEnv, err := d.chainEnvelope(ctx, s, links, env)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "read", Err: err}}, true
	}
	pin, err := d.store.SendProvider(ctx, s.ID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}}, true
	}
	now := d.cfg.Now().UTC()
	if pin != nil && pin.MessageID == "" {
		if links, err = pinned(links, pin, now); err != nil {
			return handoff{err: err, inTx: historyOf(s.ID, now, []string{err.Error()})}, true
		}
	}
	var (
		notes []string
		errs  []error
	)
	for i, l := range links {
		if i < len(links)-1 && !d.breakers.allow(l.name, now) {
			notes = append(notes, l.name+": passed over: its circuit breaker is open")
			d.breakers.count(l.name, "skipped")
			continue
		}
		if l.spec.Kind == transport.Direct {
			h, err := d.mxLink(ctx, s, env, raw)
			d.breakers.done(l.name, err, d.cfg.Now())
			if err == nil || i == len(links)-1 {
				if len(notes) > 0 {
					h.inTx = historyOf(s.ID, now, notes)
				}
				return h, true
			}
			notes = append(notes, l.name+": not accepted: "+err.Error())
			errs = append(errs, err)
			continue
		}
		if len(linkEnv.To) == 0 {
			// The mx link handed every recipient over in earlier attempts.
			return d.handOverMX(ctx, s, env, raw), true
		}
		rec, err := d.deliverLink(ctx, l, s, slot, linkEnv, raw)
		if errors.Is(err, errNoSession) {
			d.breakers.release(l.name)
		} else {
			d.breakers.done(l.name, err, d.cfg.Now())
		}
		if err == nil {
			notes = append(notes, l.name+": accepted"+idNote(rec.MessageID))
			return handoff{inTx: d.recordLink(s, l, rec.MessageID, pin, now, notes)}, true
		}
		if errors.Is(err, errNoSession) {
			return handoff{err: err}, true
		}
		if transport.Definite(err) {
			notes = append(notes, l.name+": not accepted: "+err.Error())
			errs = append(errs, err)
			continue
		}
		return d.maybeTaken(s, l, err, pin, now, notes), true
	}
	if len(errs) == 0 { // every one passed over: cannot happen, the last is always tried
		return handoff{err: errNoSession}, true
	}
	return handoff{err: chainError(errs), inTx: historyOf(s.ID, now, notes)}, true
}

// maybeTaken is the chain's end at a transport that may have taken the
// message: its outcome is unknown (a provider's pins the send to it),
// and no later transport is tried.
func (d *Deliverer) maybeTaken(s *core.Send, l link, err error, pin *core.SendProvider, now time.Time, notes []string) handoff {
	if isProvider(l.spec.Kind) && transport.ClassOf(err) == transport.Temporary && s.Tries >= d.cfg.MaxAttempts {
		err = &transport.Error{Class: transport.Ambiguous, Reached: true, Stage: transport.StageResponse,
			Err: fmt.Errorf("no answer after %d attempts (the provider may hold the message): %w", s.Tries, err)}
	}
	notes = append(notes, l.name+": outcome unknown: "+err.Error())
	if isProvider(l.spec.Kind) {
		return handoff{err: err, inTx: d.recordLink(s, l, "", pin, now, notes)}
	}
	return handoff{err: err, inTx: historyOf(s.ID, now, notes)}
}

// pinned keeps the one transport a send whose answer was lost is pinned
// to. A pin to a transport no longer configured, or to Resend past its
// key's lifetime, is an error: the send becomes unknown.
func pinned(links []link, pin *core.SendProvider, now time.Time) ([]link, error) {
	for _, l := range links {
		if l.name != pin.Transport {
			continue
		}
		if l.spec.Kind == transport.ResendKind && now.Sub(pin.Since) > ResendKeyLifetime {
			return nil, &transport.Error{Class: transport.Ambiguous, Reached: true, Stage: transport.StageRequest,
				Err: fmt.Errorf("%s may hold the message since %s and its idempotency key has expired: a new request could send it twice",
					pin.Transport, pin.Since.Format(time.RFC3339))}
		}
		return []link{l}, nil
	}
	return nil, &transport.Error{Class: transport.Ambiguous, Reached: true, Stage: transport.StageRequest,
		Err: fmt.Errorf("%s may hold the message and is no longer this send's transport", pin.Transport)}
}

// chainError is the outcome of a chain that no transport took: a retry
// when one of them refused for now, else the last refusal for good.
func chainError(errs []error) error {
	for _, err := range errs {
		if transport.ClassOf(err) == transport.Temporary {
			return err
		}
	}
	return errs[len(errs)-1]
}

func idNote(id string) string {
	if id == "" {
		return ""
	}
	return " as " + id
}

// deliverLink hands the message to one transport of the chain.
func (d *Deliverer) deliverLink(ctx context.Context, l link, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte) (transport.Receipt, error) {
	switch l.spec.Kind {
	case transport.SESKind, transport.ResendKind:
		return d.provider(l).Submit(ctx, transport.Submission{SendID: s.ID, Tenant: s.Tenant, Env: env, Raw: raw,
			Copy: copyIndex(s, env.To)})
	case transport.Relay:
		t, err := d.smtpTransport(l.url, l.tenant)
		if err != nil {
			return transport.Receipt{}, &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}
		}
		relay := t.(*transport.SMTP)
		if slot != nil && slot.Of(relay) {
			// Kept for the send's next copy; the attempt releases it.
			return transport.Receipt{}, slot.Send(ctx, env, raw)
		}
		slot, ok := relay.TryAcquire()
		if !ok {
			return transport.Receipt{}, errNoSession
		}
		return transport.Receipt{}, slot.Deliver(ctx, env, raw)
	}
	return transport.Receipt{}, &transport.Error{Class: transport.Permanent, Stage: "dial",
		Err: fmt.Errorf("%s cannot be part of a failover chain", l.spec.Kind)}
}

// recordLink is the transaction's part of a provider's outcome: its record
// (with the message id, or pinning the send when it is unknown) and the
// attempt's history.
func (d *Deliverer) recordLink(s *core.Send, l link, messageID string, pin *core.SendProvider, now time.Time, notes []string) func(core.Tx) error {
	history := historyOf(s.ID, now, notes)
	if !isProvider(l.spec.Kind) {
		return history
	}
	return func(tx core.Tx) error {
		since := now
		if pin != nil && pin.Transport == l.name {
			since = pin.Since
		}
		if err := tx.SetSendProvider(context.Background(), &core.SendProvider{SendID: s.ID, Tenant: s.Tenant, Transport: l.name,
			Provider: string(l.spec.Kind), MessageID: messageID, Since: since, UpdatedAt: now}); err != nil {
			return err
		}
		if messageID != "" && perCopy(s) {
			// Each copy has an id of its own: the provider's events about
			// any of them find the send (the record keeps the latest).
			if err := tx.AddProviderCopy(context.Background(), s.ID, string(l.spec.Kind), messageID); err != nil {
				return err
			}
		}
		return history(tx)
	}
}

// historyOf writes one handoff entry per transport the attempt tried.
func historyOf(sendID string, now time.Time, notes []string) func(core.Tx) error {
	return func(tx core.Tx) error {
		events := make([]core.Event, 0, len(notes))
		for _, n := range notes {
			events = append(events, core.Event{Type: core.EventHandoff, At: now, Detail: n})
		}
		return tx.AddEvent(context.Background(), sendID, events...)
	}
}

// checkFallbacks refuses a chain that cannot work: capture keeps mail
// locally (no failover from or to it).
func checkFallbacks(primary transport.Spec, fallbacks []string) error {
	if len(fallbacks) == 0 {
		return nil
	}
	if primary.Kind == transport.Capture {
		return errors.New("--fallback-transport needs a --transport that delivers (not capture)")
	}
	for _, f := range fallbacks {
		spec, err := transport.ParseSpec(f)
		if err != nil {
			return fmt.Errorf("--fallback-transport: %w", err)
		}
		if spec.Kind == transport.Capture {
			return errors.New("--fallback-transport: capture cannot be a fallback")
		}
	}
	return nil
}
