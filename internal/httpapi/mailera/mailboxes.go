package mailera

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/transport"
)

// The Mailera-style routes under /api/public/v1 (docs/compatibility.md).
// They speak the native error body and idempotency rules; the mailbox id is
// part of the path, so it is part of every key's scope.

// mailboxSendRequest is the body of POST /api/public/v1/mailboxes/{id}/send:
// the native send body without mailbox_id (the path names it), plus mode
// and the reply and forward fields.
type mailboxSendRequest struct {
	kit.SendRequest
	Mode       string   `json:"mode"`
	InReplyTo  string   `json:"in_reply_to"`
	References []string `json:"references"`
	OriginalID string   `json:"original_id"`
	// ReplyToID names a received message (rcv_…) to answer: recipients,
	// In-Reply-To, References and "Re:" come from it.
	ReplyToID string `json:"reply_to_id"`
	ReplyAll  bool   `json:"reply_all"`
}

func (s *API) Send(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var req mailboxSendRequest
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	mailboxID := r.PathValue("id")
	if req.MailboxID != "" && req.MailboxID != mailboxID {
		return nil, core.Errorf(core.CodeValidation, "mailbox_id", "the mailbox is the one in the path; leave mailbox_id out")
	}
	if req.Stream != "" {
		// Mailera's body has no stream: its sends take the key's default.
		return nil, core.Errorf(core.CodeValidation, "stream", "this route takes no stream: its sends are the API key's default stream (transactional unless the key says bulk); use POST /v1/send to choose")
	}
	if req.Unsubscribe {
		return nil, core.Errorf(core.CodeValidation, "unsubscribe", "this route takes no unsubscribe: use POST /v1/send, or a key whose default stream is bulk")
	}
	if err := kit.CheckRecipientCounts(req.To, req.Cc, req.Bcc, req.ReplyTo); err != nil {
		return nil, err
	}
	sr := &app.SendRequest{
		To: req.To, Cc: req.Cc, Bcc: req.Bcc, ReplyTo: req.ReplyTo, From: req.From, MailboxID: mailboxID,
		Subject: req.Subject, Text: req.Text, HTML: req.HTML, TemplateID: req.TemplateID, Variables: req.Variables,
		Headers: req.Headers, Tags: req.Tags, References: req.References,
		Attachments: kit.AppAttachments(req.Attachments), ScheduledAt: req.ScheduledAt,
	}
	mode := req.Mode
	if mode == "" {
		mode = app.ModeSend
	}
	switch mode {
	case app.ModeSend, app.ModeReply, app.ModeForward:
	default:
		return nil, core.Errorf(core.CodeValidation, "mode", "mode must be send, reply or forward")
	}
	if mode != app.ModeReply && (req.InReplyTo != "" || len(req.References) > 0 || req.ReplyToID != "") {
		return nil, core.Errorf(core.CodeValidation, "in_reply_to", "in_reply_to and references need mode reply")
	}
	if mode != app.ModeForward && req.OriginalID != "" {
		return nil, core.Errorf(core.CodeValidation, "original_id", "original_id needs mode forward")
	}
	switch mode {
	case app.ModeReply:
		if err := s.mailboxReply(ctx, key, &req, sr); err != nil {
			return nil, err
		}
	case app.ModeForward:
		if req.OriginalID == "" {
			return nil, core.Errorf(core.CodeValidation, "original_id", "a forward needs original_id: a send (snd_…) or inbox message (msg_…) id")
		}
		raw, subject, err := s.original(ctx, key, req.OriginalID)
		if err != nil {
			return nil, err
		}
		sr.Forward = raw
		if sr.Subject == "" && sr.TemplateID == "" {
			sr.Subject = subject
		}
		if sr.Text == "" && sr.HTML == "" && sr.TemplateID == "" {
			sr.Text = "Forwarded message attached."
		}
	}
	send, err := s.Svc.PrepareSend(ctx, key, idemKey, sr)
	if err != nil {
		return nil, err
	}
	switch mode {
	case app.ModeReply:
		send.Subject = app.ReplySubject(send.Subject)
	case app.ModeForward:
		send.Subject = app.ForwardSubject(send.Subject)
	}
	if len(send.Subject) > app.MaxSubjectLen {
		return nil, core.Errorf(core.CodeValidation, "subject", "subject is longer than %d bytes", app.MaxSubjectLen)
	}
	return s.AcceptStep(key, send, kit.NativeSendView), nil
}

// mailboxReply makes sr a reply: to the received message reply_to_id
// (which must have arrived at this mailbox), or to the Message-ID
// in_reply_to.
func (s *API) mailboxReply(ctx context.Context, key *core.APIKey, req *mailboxSendRequest, sr *app.SendRequest) error {
	switch {
	case req.ReplyToID != "" && req.InReplyTo != "":
		return core.Errorf(core.CodeValidation, "reply_to_id", "give reply_to_id or in_reply_to, not both")
	case req.ReplyToID != "":
		if !key.Has(core.ScopeRead) { // the scopes of every reply door (app.Service.PrepareReply)
			return core.Errorf(core.CodeForbidden, "reply_to_id", "replying needs an API key with the read scope")
		}
		m, err := s.Svc.ReceivedMessage(ctx, key, req.ReplyToID)
		if err != nil || m.MailboxID != sr.MailboxID {
			return core.Errorf(core.CodeValidation, "reply_to_id", "no received message %q in this mailbox", req.ReplyToID)
		}
		if _, err = s.Svc.ReplyRequest(ctx, key, req.ReplyToID, req.ReplyAll, sr); err != nil {
			return err
		}
		return s.HoldAgentMail(ctx, key, nil, m, sr, false)
	case req.InReplyTo == "":
		return core.Errorf(core.CodeValidation, "in_reply_to", "a reply needs reply_to_id (a received message) or in_reply_to (the Message-ID it answers)")
	}
	sr.InReplyTo = req.InReplyTo
	return nil
}

// original returns the whole message to forward and its subject: a send,
// rendered as its attempts render it (without a DKIM signature), or a
// message of the capture inbox, as kept. Forwarding shows the original to
// whoever gets the forward, so it is a read: the key needs the read scope,
// and a key limited to mailboxes (agent keys are) sees only the sends of
// those mailboxes and their inbox copies; others answer as unknown ids, so
// that a refusal says nothing of what exists.
func (s *API) original(ctx context.Context, key *core.APIKey, id string) ([]byte, string, error) {
	if !key.Has(core.ScopeRead) {
		return nil, "", core.Errorf(core.CodeForbidden, "original_id", "forwarding needs an API key with the read scope")
	}
	notFound := core.Errorf(core.CodeValidation, "original_id", "no send or inbox message %q", id)
	if strings.HasPrefix(id, "rcv_") {
		m, err := s.Svc.ReceivedMessage(ctx, key, id)
		if err != nil {
			return nil, "", notFound
		}
		raw, err := s.Svc.ReceivedRaw(ctx, key, id)
		if err != nil {
			return nil, "", err
		}
		if len(raw) > app.MaxForwardBytes {
			return nil, "", core.Errorf(core.CodeValidation, "original_id", "the original message is larger than %d bytes, the most a forward may attach", app.MaxForwardBytes)
		}
		return raw, m.Subject, nil
	}
	var (
		raw     []byte
		subject string
		sendID  = id
	)
	switch {
	case strings.HasPrefix(id, "snd_"):
	case strings.HasPrefix(id, "msg_"):
		m, err := s.Reads.InboxMessage(ctx, key.Tenant, id)
		if errors.Is(err, core.ErrNotFound) {
			return nil, "", notFound
		}
		if err != nil {
			return nil, "", err
		}
		raw, subject, sendID = m.Raw, m.Subject, m.SendID
		if len(key.Mailboxes) == 0 {
			break
		}
		if sendID == "" {
			return nil, "", notFound
		}
	default:
		return nil, "", notFound
	}
	if raw == nil || len(key.Mailboxes) > 0 {
		send, err := s.Reads.Send(ctx, key.Tenant, sendID)
		if errors.Is(err, core.ErrNotFound) {
			return nil, "", notFound
		}
		if err != nil {
			return nil, "", err
		}
		if !key.MayUseMailbox(send.MailboxID) {
			return nil, "", notFound
		}
		if raw == nil {
			if send.AttachmentCount > 0 { // the original as it was delivered, its files included
				if send.Attachments, err = s.Reads.SendAttachments(ctx, send.ID); err != nil {
					return nil, "", err
				}
			}
			if raw, _, err = render.Message(send); err != nil {
				return nil, "", err
			}
			subject = send.Subject
		}
	}
	if len(raw) > app.MaxForwardBytes {
		return nil, "", core.Errorf(core.CodeValidation, "original_id", "the original message is larger than %d bytes, the most a forward may attach", app.MaxForwardBytes)
	}
	return raw, subject, nil
}

// statusTTL is how long a mailbox status is reused, so that the route
// cannot be used to hammer a relay.
const statusTTL = 5 * time.Second

// probeTimeout bounds one status check.
const probeTimeout = 10 * time.Second

type mailboxStatus struct {
	MailboxID string  `json:"mailbox_id"`
	CanSend   bool    `json:"can_send"`
	CheckedAt string  `json:"checked_at"`
	Error     *string `json:"error"`
	// CanReceive is whether a connected mailbox can log in to its IMAP
	// server (null when it is not connected), IMAPError why not.
	CanReceive *bool   `json:"can_receive"`
	IMAPError  *string `json:"imap_error"`
	// IMAPSync is where the sync stands ("syncing", "paused"; null before
	// the first), IMAPSyncError why it is paused, as a class.
	IMAPSync      *string `json:"imap_sync"`
	IMAPSyncError *string `json:"imap_sync_error"`
}

// StatusCache keeps one recent check per mailbox and relay. A caller that
// finds a check running waits for it instead of starting another.
type StatusCache struct {
	mu      sync.Mutex
	entries map[string]*statusEntry
}

type statusEntry struct {
	mu  sync.Mutex // held while probing
	at  time.Time
	err error
}

func NewStatusCache() *StatusCache { return &StatusCache{entries: map[string]*statusEntry{}} }

func (c *StatusCache) entry(k string) *statusEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		if len(c.entries) > 10000 { // bounded: forget everything rather than grow
			clear(c.entries)
		}
		e = &statusEntry{}
		c.entries[k] = e
	}
	return e
}

// handleMailboxStatus answers whether the mailbox can log in to its relay
// now. It says nothing about any send.
func (s *API) Status(cache *StatusCache) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := kit.APIKeyFrom(ctx)
		id := r.PathValue("id")
		if !key.MayUseMailbox(id) {
			kit.WriteError(w, r, s.Logger, core.Errorf(core.CodeForbidden, "", "this API key may not use mailbox %q", id))
			return
		}
		mb, err := s.Svc.Mailbox(ctx, key.Tenant, id)
		if err != nil {
			kit.WriteError(w, r, s.Logger, err)
			return
		}
		now := s.Svc.Now()
		out := mailboxStatus{MailboxID: mb.ID, CanSend: true, CheckedAt: kit.RFC3339(now)}
		url, policy := mb.Transport, s.Svc.Outbound()
		if url == "" {
			// The operator's relay is trusted: no policy.
			url, policy = s.Cfg.DefaultTransport, nil
		}
		switch {
		case mb.ReceiveOnly:
			out.CanSend, out.Error = false, kit.OptString("mailbox is receive-only")
		case !transport.IsRelay(url):
			// No relay to log in to: capture keeps mail locally, mx talks
			// to each recipient's exchanger.
		default:
			e := cache.entry(key.Tenant + "\x00" + mb.ID + "\x00" + url)
			e.mu.Lock()
			if e.at.IsZero() || now.Sub(e.at) >= statusTTL || now.Before(e.at) {
				e.err = probe(ctx, url, policy)
				e.at = s.Svc.Now()
			}
			at, perr := e.at, e.err
			e.mu.Unlock()
			out.CheckedAt = kit.RFC3339(at)
			if perr != nil {
				out.CanSend, out.Error = false, kit.OptString(describeProbe(perr))
			}
		}
		s.checkIMAP(ctx, cache, mb, &out)
		kit.WriteJSON(w, http.StatusOK, out)
	}
}

// checkIMAP adds a connected mailbox's IMAP login to its status, reused
// for statusTTL like the relay's.
func (s *API) checkIMAP(ctx context.Context, cache *StatusCache, mb *core.Mailbox, out *mailboxStatus) {
	if mb.IMAP == nil {
		return
	}
	e := cache.entry(mb.Tenant + "\x00" + mb.ID + "\x00imap\x00" + mb.IMAPShown)
	e.mu.Lock()
	now := s.Svc.Now()
	if e.at.IsZero() || now.Sub(e.at) >= statusTTL || now.Before(e.at) {
		// The check outlives a caller who hangs up, as the relay's.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		_, failure := s.Svc.CheckIMAP(pctx, mb)
		cancel()
		e.err, e.at = nil, s.Svc.Now()
		if failure != "" {
			e.err = errors.New(failure)
		}
	}
	ok, perr := e.err == nil, e.err
	e.mu.Unlock()
	out.CanReceive = &ok
	if perr != nil {
		out.IMAPError = kit.OptString(perr.Error())
	}
	st, err := s.Svc.IMAPSyncState(ctx, mb.Tenant, mb.ID)
	if err != nil {
		if !errors.Is(err, core.ErrNotFound) {
			s.Logger.ErrorContext(ctx, "read imap sync state", "mailbox_id", mb.ID, "error", err)
		}
		return
	}
	out.IMAPSync = kit.OptString(string(st.Status))
	if st.ErrorClass != "" {
		out.IMAPSyncError = kit.OptString(st.ErrorClass)
	}
}

// probe logs in to the relay at url. With a policy (a relay a tenant set),
// it connects only where the policy allows.
func probe(ctx context.Context, url string, policy *netpolicy.Policy) error {
	cfg, err := transport.ParseSMTPURL(url)
	if err != nil {
		return err
	}
	cfg.DialTimeout, cfg.CommandTimeout = probeTimeout, probeTimeout
	if policy != nil {
		cfg.DialContext = policy.DialContext
	}
	// The check outlives a caller who hangs up: the others waiting for it
	// get its answer.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	return transport.Probe(pctx, cfg)
}

// describeProbe says why a status check failed in classes only: the stage
// and the SMTP code, never the relay's text, and for connections that did
// not reach an SMTP server only refused, timed out, blocked and the like.
// Anything more would let a tenant map the network around sendonce (is
// that port open, what runs there).
func describeProbe(err error) string {
	var te *transport.Error
	switch {
	case errors.Is(err, netpolicy.ErrBlocked):
		return netpolicy.FailBlocked
	case !errors.As(err, &te):
		return "the relay could not be checked"
	case te.Code != 0:
		return fmt.Sprintf("the relay answered %d at %s", te.Code, te.Stage)
	case !te.Reached:
		return netpolicy.Describe(te.Err)
	case te.Stage == transport.StageTLS:
		return netpolicy.FailTLS
	}
	return "the session failed at " + te.Stage
}
