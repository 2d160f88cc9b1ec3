package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// Providers are email APIs reached over HTTPS (Amazon SES, Resend) rather
// than SMTP. They take one Submission — the message sendonce rendered and
// signed, with the send it belongs to — and answer with the provider's own
// id for it.
//
// Their failures are classified like SMTP's, with one more distinction
// that only matters to failover (fallback.go):
//
//   - Temporary without MaybeAccepted: the provider definitely did not take
//     the message (nothing of the request was written, or it answered with
//     a documented refusal such as 429). Retry, or try the next transport.
//   - Temporary with MaybeAccepted: the provider may hold the message, but
//     it honours an idempotency key (Resend), so the same request again is
//     safe — on this provider only, never on another.
//   - Permanent: a documented refusal of this message (SES MessageRejected,
//     Resend's validation errors).
//   - Ambiguous: the provider may hold the message and has no idempotency
//     key (SES): the send becomes unknown.

// Submission is one message for a provider.
type Submission struct {
	// SendID names the send: Resend's Idempotency-Key is derived from it,
	// SES gets it as an email tag.
	SendID string
	// Tenant owns the send (an SES email tag).
	Tenant string
	Env    Envelope
	// Raw is the message as sendonce rendered (and DKIM-signed) it.
	Raw []byte
	// Copy names the copy of a send that goes out as one copy per
	// recipient (its recipient's index); "" for the send's one message.
	// Resend's Idempotency-Key carries it: the copies are distinct emails.
	Copy string
}

// Receipt is what a provider answered when it took a message.
type Receipt struct {
	// Provider is the provider's kind: "ses" or "resend".
	Provider string
	// MessageID is the provider's id for the message (SES's MessageId,
	// Resend's email id).
	MessageID string
}

// Provider is a transport that answers with a Receipt.
type Provider interface {
	Transport
	// Submit hands the message over. It returns the receipt only when the
	// provider took it; otherwise an *Error.
	Submit(ctx context.Context, sub Submission) (Receipt, error)
	// Kind is the provider's kind (Receipt.Provider).
	Kind() Kind
}

// Definite reports whether err says the transport definitely did not take
// the message: an *Error that is Temporary without MaybeAccepted, or
// Permanent. Anything else — ambiguous, maybe accepted, or an error that is
// not an *Error — is not definite, and never falls over.
func Definite(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Class {
	case Temporary:
		return !e.MaybeAccepted
	case Permanent:
		return true
	}
	return false
}

// Stages of a provider attempt.
const (
	StageRequest  = "request"  // building the request (local)
	StageConnect  = "connect"  // DNS, TCP, TLS: nothing of the request written
	StageResponse = "response" // after the request was (maybe) written
)

// wire tracks whether any of an HTTP request reached the connection.
type wire struct {
	wrote atomic.Bool
}

type wireKey struct{}

// withWire returns ctx carrying a fresh wire, watched by a traced client.
func withWire(ctx context.Context) (context.Context, *wire) {
	w := &wire{}
	return context.WithValue(ctx, wireKey{}, w), w
}

// tracedClient is an *http.Client that marks the request's wire (if its
// context carries one) as soon as the request's headers were written to a
// connection. Until then a failure (DNS, refused connection, TLS handshake)
// means the server cannot have seen the request.
type tracedClient struct{ c *http.Client }

// Do implements the AWS SDK's HTTPClient.
func (t tracedClient) Do(req *http.Request) (*http.Response, error) {
	if w, ok := req.Context().Value(wireKey{}).(*wire); ok {
		trace := &httptrace.ClientTrace{
			// Conservative: headers written into the connection's buffer
			// count as written even if they never left it.
			WroteHeaders: func() { w.wrote.Store(true) },
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	return t.c.Do(req)
}

// newHTTPClient returns the HTTP client of a provider: its own connection
// pool, dialling through dial when set (the outbound policy for a tenant's
// provider), TLS verified against roots when set (tests), no proxy from the
// environment, redirects not followed, and no automatic retries.
func newHTTPClient(dial func(ctx context.Context, network, address string) (net.Conn, error), roots *tls.Config) *http.Client {
	d := &net.Dialer{Timeout: 15 * time.Second}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       60 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	if dial != nil {
		tr.DialContext = dial
	}
	if roots != nil {
		tr.TLSClientConfig = roots.Clone()
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// networkError classifies a failure with no HTTP answer: definite when no
// byte of the request was written, otherwise maybe accepted (idempotent
// providers) or ambiguous.
func networkError(w *wire, err error, idempotent bool) *Error {
	if !w.wrote.Load() {
		return &Error{Class: Temporary, Stage: StageConnect, Err: err}
	}
	if idempotent {
		return &Error{Class: Temporary, MaybeAccepted: true, Reached: true, Stage: StageResponse, Err: err}
	}
	return &Error{Class: Ambiguous, Reached: true, Stage: StageResponse, Err: err}
}
