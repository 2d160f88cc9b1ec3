package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/sendonce/sendonce/internal/defaults"
)

// Resend is the resend kind: Resend's POST /emails.
const ResendKind Kind = "resend"

// DefaultResendHost is the API host of a resend:// URL without one.
const DefaultResendHost = "api.resend.com"

// ResendConfig configures the Resend transport.
type ResendConfig struct {
	APIKey string
	// Host is host[:port]; DefaultResendHost when empty.
	Host string
	// Insecure (?tls=none) speaks plain HTTP: tests only.
	Insecure bool
	// DialContext opens connections (the outbound policy for a provider a
	// tenant configured); nil dials directly.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// TLSConfig adds trusted roots (tests); nil: the system's.
	TLSConfig *tls.Config
	// Timeout bounds one request; defaults to 30s (and the attempt's own
	// deadline bounds it anyway).
	Timeout time.Duration
	// Tries is how many requests one Submit makes while the answer is
	// lost (each with the same Idempotency-Key); defaults to 3.
	Tries int
	// RetryWait is the pause between those requests; defaults to 1s.
	RetryWait time.Duration
}

// ParseResendURL parses resend://API_KEY@[HOST[:PORT]][?tls=none]. The
// key may be URL-encoded. Errors never quote the key.
func ParseResendURL(s string) (ResendConfig, error) {
	var c ResendConfig
	u, err := parseProviderURL(s, ResendKind, "API key", "resend://API_KEY@[HOST[:PORT]]")
	if err != nil {
		return c, err
	}
	if u.User == nil || u.User.Username() == "" {
		return c, errors.New("transport: invalid resend URL: missing API key (resend://API_KEY@)")
	}
	if _, has := u.User.Password(); has {
		return c, errors.New("transport: invalid resend URL: the API key is the user part alone (resend://API_KEY@)")
	}
	c.APIKey = u.User.Username()
	c.Host = u.Host
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("transport: invalid resend URL: invalid port %q", p)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("transport: invalid resend URL query: %w", err)
	}
	for key, vals := range q {
		if key != "tls" || len(vals) != 1 {
			return c, fmt.Errorf("transport: invalid resend URL: unknown parameter %q", key)
		}
		if vals[0] != "none" {
			return c, fmt.Errorf("transport: invalid resend URL: tls=%q (only tls=none, for tests)", vals[0])
		}
		c.Insecure = true
	}
	return c, nil
}

// parseProviderURL is the start ParseResendURL and ParseSESURL share: s
// parses, its scheme is kind, and it has no opaque part, path or
// fragment. secret names what must be URL-encoded, form the URL's shape;
// the errors say them, never s (it holds the secret).
func parseProviderURL(s string, kind Kind, secret, form string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("transport: invalid %s URL (check that the %s is URL-encoded)", kind, secret)
	}
	if !strings.EqualFold(u.Scheme, string(kind)) {
		return nil, fmt.Errorf("transport: invalid %s URL: scheme %q", kind, u.Scheme)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return nil, fmt.Errorf("transport: invalid %s URL: want %s", kind, form)
	}
	return u, nil
}

// Redacted is the URL with the API key replaced, fit for logs and the API.
func (c ResendConfig) Redacted() string {
	u := url.URL{Scheme: string(ResendKind), User: url.User("xxxxx"), Host: c.Host}
	if c.Insecure {
		u.RawQuery = "tls=none"
	}
	return u.String()
}

func (c ResendConfig) baseURL() string {
	host := c.Host
	defaults.Set(&host, DefaultResendHost)
	if c.Insecure {
		return "http://" + host
	}
	return "https://" + host
}

// ResendIdempotencyKey is the Idempotency-Key every request for a send
// carries: Resend answers a repeated key with the first request's email
// (for 24 hours), so a lost answer is retried without a second email.
func ResendIdempotencyKey(sendID string) string { return "sendonce-" + sendID }

// Resend delivers through Resend's HTTP API. It is safe for concurrent use.
type Resend struct {
	cfg    ResendConfig
	client tracedClient
}

var _ Provider = (*Resend)(nil)

// NewResend returns a Resend transport.
func NewResend(cfg ResendConfig) *Resend {
	defaults.Set(&cfg.Timeout, 30*time.Second)
	defaults.Set(&cfg.Tries, 3)
	defaults.Set(&cfg.RetryWait, time.Second)
	return &Resend{cfg: cfg, client: tracedClient{newHTTPClient(cfg.DialContext, cfg.TLSConfig)}}
}

// Kind implements Provider.
func (r *Resend) Kind() Kind { return ResendKind }

// Close drops idle connections.
func (r *Resend) Close() error {
	r.client.c.CloseIdleConnections()
	return nil
}

// Deliver implements Transport for a message without a send: the key is
// derived from its Message-ID, fixed per send as well.
func (r *Resend) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	id := ""
	if m, err := mail.CreateReader(bytes.NewReader(raw)); err == nil {
		id, _ = m.Header.MessageID()
	}
	if id == "" {
		return &Error{Class: Permanent, Stage: StageRequest, Err: errors.New("a message without a Message-ID has no idempotency key")}
	}
	_, err := r.Submit(ctx, Submission{SendID: id, Env: env, Raw: raw})
	return err
}

// Submit sends the message with POST /emails. While the answer is lost (a
// timeout or a reset after the request was written, a 5xx, a concurrent
// request with the same key) it asks again with the same Idempotency-Key,
// up to Tries times; if the answer is still lost, the error is Temporary
// with MaybeAccepted: retry later, on Resend only.
func (r *Resend) Submit(ctx context.Context, sub Submission) (Receipt, error) {
	body, err := resendPayload(sub)
	if err != nil {
		return Receipt{}, &Error{Class: Permanent, Stage: StageRequest, Err: err}
	}
	key := ResendIdempotencyKey(sub.SendID)
	if sub.Copy != "" {
		// One copy per recipient: each is its own email, so each has its
		// own key (the same at every attempt of that copy).
		key += "." + sub.Copy
	}
	var last *Error
	for try := 1; try <= r.cfg.Tries; try++ {
		if try > 1 {
			select {
			case <-ctx.Done():
				return Receipt{}, last
			case <-time.After(r.cfg.RetryWait):
			}
		}
		id, e := r.post(ctx, key, body)
		if e == nil {
			return Receipt{Provider: string(ResendKind), MessageID: id}, nil
		}
		last = e
		if !e.MaybeAccepted {
			return Receipt{}, e
		}
	}
	return Receipt{}, last
}

// post makes one request and classifies its answer.
func (r *Resend) post(ctx context.Context, key string, body []byte) (string, *Error) {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	rctx, w := withWire(rctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.cfg.baseURL()+"/emails", bytes.NewReader(body))
	if err != nil {
		return "", &Error{Class: Permanent, Stage: StageRequest, Err: errors.New("invalid Resend host")}
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", "sendonce")
	resp, err := r.client.Do(req)
	if err != nil {
		return "", networkError(w, scrub(err), true)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", &Error{Class: Temporary, MaybeAccepted: true, Reached: true, Stage: StageResponse, Err: scrub(err)}
	}
	return classifyResend(resp, b)
}

// resendAnswer is the JSON of Resend's answers: an email's id, or an
// error's name and message.
type resendAnswer struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

// classifyResend reads an answer (docs/providers.md has the table, from
// resend.com/docs/api-reference/errors).
func classifyResend(resp *http.Response, body []byte) (string, *Error) {
	var a resendAnswer
	_ = json.Unmarshal(body, &a)
	code := resp.StatusCode
	fail := func(c Class, maybe bool) *Error {
		msg := a.Name
		if a.Message != "" {
			msg += ": " + a.Message
		}
		if msg == "" {
			msg = http.StatusText(code)
		}
		e := &Error{Class: c, MaybeAccepted: maybe, Reached: true, Code: code, Stage: StageResponse,
			Err: fmt.Errorf("Resend answered %d %s", code, truncate(msg, 300))}
		if s := resp.Header.Get("Retry-After"); s != "" {
			if n, err := strconv.Atoi(s); err == nil && n > 0 {
				e.RetryAfter = time.Duration(n) * time.Second
			}
		}
		return e
	}
	switch {
	case code >= 200 && code < 300:
		if a.ID == "" {
			return "", fail(Temporary, true) // taken, maybe; the key finds it
		}
		return a.ID, nil
	case code == http.StatusTooManyRequests:
		return "", fail(Temporary, false) // rate or quota: not taken
	case code == http.StatusConflict && a.Name == "concurrent_idempotent_requests":
		return "", fail(Temporary, true) // the first request is still running
	case code == http.StatusConflict:
		// invalid_idempotent_request: the key was used with another
		// payload, so an email exists for it that this one is not.
		return "", fail(Ambiguous, false)
	case code == http.StatusUnauthorized, code == http.StatusForbidden && strings.Contains(a.Name, "api_key"):
		// The account's key, not the message: not taken, the operator
		// fixes it (or the next transport takes over).
		return "", fail(Temporary, false)
	case code >= 500:
		return "", fail(Temporary, true)
	}
	// 400, 403 (domain not verified), 404, 405, 413, 422, 451: this
	// message is refused.
	return "", fail(Permanent, false)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// scrub removes the URL from a *url.Error (it never holds the key, but
// keeps errors short) and leaves the cause.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// resendEmail is POST /emails's body.
type resendEmail struct {
	From        string             `json:"from"`
	To          []string           `json:"to"`
	Cc          []string           `json:"cc,omitempty"`
	Bcc         []string           `json:"bcc,omitempty"`
	ReplyTo     any                `json:"reply_to,omitempty"` // a string, or an array of more than one
	Subject     string             `json:"subject"`
	HTML        string             `json:"html,omitempty"`
	Text        string             `json:"text,omitempty"`
	Headers     map[string]string  `json:"headers,omitempty"`
	Attachments []resendAttachment `json:"attachments,omitempty"`
	Tags        []resendTag        `json:"tags,omitempty"`
}

type resendAttachment struct {
	Filename    string `json:"filename,omitempty"`
	Content     string `json:"content"`
	ContentType string `json:"content_type,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
}

type resendTag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// resendOwnHeaders are the headers Resend writes from the body's fields
// (or itself): the rest of the message's header goes in "headers".
var resendOwnHeaders = []string{"from", "to", "cc", "bcc", "reply-to", "subject", "date", "mime-version",
	"content-type", "content-transfer-encoding", "dkim-signature", "sender", "return-path"}

// resendPayload turns the rendered message into Resend's fields: Resend
// builds (and signs) the MIME message itself. The recipients are the
// envelope's (suppressed ones left out), each in the header field that
// named it, Bcc for the rest. The same message always makes the same
// payload, as a repeated Idempotency-Key requires.
func resendPayload(sub Submission) ([]byte, error) {
	mr, err := mail.CreateReader(bytes.NewReader(sub.Raw))
	if err != nil {
		return nil, fmt.Errorf("read the rendered message: %w", err)
	}
	h := mr.Header
	e := resendEmail{Headers: map[string]string{}}
	from, err := h.AddressList("From")
	if err != nil || len(from) == 0 {
		return nil, errors.New("the message has no From address")
	}
	e.From = from[0].String()
	if e.Subject, err = h.Subject(); err != nil {
		e.Subject = h.Get("Subject")
	}
	if err := placeRecipients(&e, h, sub); err != nil {
		return nil, err
	}
	if rt, err := h.AddressList("Reply-To"); err == nil && len(rt) > 0 {
		var list []string
		for _, a := range rt {
			list = append(list, a.String())
		}
		if e.ReplyTo = list; len(list) == 1 {
			e.ReplyTo = list[0]
		}
	}
	fields := h.Fields()
	for fields.Next() {
		k := fields.Key()
		lk := strings.ToLower(k)
		if slices.Contains(resendOwnHeaders, lk) || strings.HasPrefix(lk, "content-") {
			continue
		}
		if _, dup := e.Headers[k]; dup {
			continue
		}
		v, err := fields.Text()
		if err != nil {
			v = fields.Value()
		}
		e.Headers[k] = strings.Join(strings.Fields(v), " ")
	}
	if err := readParts(mr, &e); err != nil {
		return nil, err
	}
	e.Tags = append(e.Tags, resendTag{Name: "sendonce_send_id", Value: tagValue(sub.SendID)})
	if sub.Tenant != "" {
		e.Tags = append(e.Tags, resendTag{Name: "sendonce_tenant", Value: tagValue(sub.Tenant)})
	}
	return json.Marshal(e)
}

// placeRecipients fills e's To, Cc and Bcc: the message's To and Cc
// addresses that are to be sent to (the envelope's), and the envelope's
// others as Bcc.
func placeRecipients(e *resendEmail, h mail.Header, sub Submission) error {
	envTo := map[string]bool{}
	for _, a := range sub.Env.To {
		envTo[strings.ToLower(a)] = true
	}
	placed := map[string]bool{}
	pick := func(field string) []string {
		list, _ := h.AddressList(field)
		var out []string
		for _, a := range list {
			k := strings.ToLower(a.Address)
			if envTo[k] && !placed[k] {
				placed[k] = true
				out = append(out, a.String())
			}
		}
		return out
	}
	e.To, e.Cc = pick("To"), pick("Cc")
	for _, a := range sub.Env.To {
		if !placed[strings.ToLower(a)] {
			placed[strings.ToLower(a)] = true
			e.Bcc = append(e.Bcc, a)
		}
	}
	if len(e.To) == 0 && sub.Copy != "" {
		// One recipient's copy (Submission.Copy) for a Cc or Bcc
		// recipient: Resend needs a To, and writes To and Cc from the
		// addresses it sends to anyway, so the copy names its one
		// recipient in To.
		e.To, e.Cc, e.Bcc = slices.Concat(e.Cc, e.Bcc), nil, nil
	}
	if len(e.To) == 0 {
		return errors.New("Resend needs a To recipient, and none of the message's To addresses is to be sent to")
	}
	return nil
}

// readParts fills the text and HTML bodies (the first of each that is not
// an attachment) and the attachments.
func readParts(mr *mail.Reader, e *resendEmail) error {
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the rendered message: %w", err)
		}
		b, err := io.ReadAll(p.Body)
		if err != nil {
			return fmt.Errorf("read the rendered message: %w", err)
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			cid := strings.Trim(ph.Get("Content-Id"), "<> ")
			switch {
			case ct == "text/plain" && e.Text == "" && cid == "":
				e.Text = string(b)
			case ct == "text/html" && e.HTML == "" && cid == "":
				e.HTML = string(b)
			default:
				_, params, _ := ph.ContentDisposition()
				e.Attachments = append(e.Attachments, resendAttachment{Filename: params["filename"],
					Content: base64.StdEncoding.EncodeToString(b), ContentType: ct, ContentID: cid})
			}
		case *mail.AttachmentHeader:
			name, _ := ph.Filename()
			ct, _, _ := ph.ContentType()
			e.Attachments = append(e.Attachments, resendAttachment{Filename: name,
				Content: base64.StdEncoding.EncodeToString(b), ContentType: ct,
				ContentID: strings.Trim(ph.Get("Content-Id"), "<> ")})
		}
	}
}

// tagValue keeps what Resend and SES allow in a tag (ASCII letters,
// digits, '_' and '-', at most 256): anything else becomes '_'.
func tagValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 256 {
		b = b[:256]
	}
	return string(b)
}
