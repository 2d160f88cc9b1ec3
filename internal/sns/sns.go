// Package sns verifies Amazon SNS HTTP(S) messages as AWS documents it
// (docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):
// the string to sign is built from the message's fields in a fixed order,
// and its signature (SignatureVersion 1: SHA1withRSA; 2: SHA256withRSA)
// must verify under the certificate at SigningCertURL — fetched only over
// HTTPS, only from an SNS host (sns.REGION.amazonaws.com) or one the
// operator added, and cached. It also confirms subscriptions.
package sns

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Message is an SNS HTTP(S) message: a Notification, a
// SubscriptionConfirmation or an UnsubscribeConfirmation.
type Message struct {
	Type             string
	MessageId        string
	Token            string
	TopicArn         string
	Subject          string
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string
	SubscribeURL     string
	UnsubscribeURL   string
}

// Parse reads a message's JSON body.
func Parse(body []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("sns: not a message: %w", err)
	}
	switch m.Type {
	case "Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation":
	default:
		return nil, fmt.Errorf("sns: unknown message type %q", m.Type)
	}
	return &m, nil
}

// StringToSign is the text the message's signature covers: each field's
// name and value, one per line, in the documented order; Subject only when
// the notification has one.
func (m *Message) StringToSign() string {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageId)
	if m.Type == "Notification" {
		if m.Subject != "" {
			add("Subject", m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
		return b.String()
	}
	add("SubscribeURL", m.SubscribeURL)
	add("Timestamp", m.Timestamp)
	add("Token", m.Token)
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return b.String()
}

// Errors of Verify: every one has ErrInvalid in its chain.
var ErrInvalid = errors.New("sns: message not verified")

// snsHost is Amazon SNS's certificate host of a region.
var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// Verifier checks messages. The zero value is not usable: use New.
type Verifier struct {
	// Hosts are HOST:PORT values a certificate or subscription URL may
	// name besides SNS's own hosts (--sns-cert-host: tests).
	hosts  []string
	client *http.Client
	now    func() time.Time
	window time.Duration

	mu    sync.Mutex
	certs map[string]*x509.Certificate
	order []string // certs' keys, oldest first
}

// MaxCerts bounds the certificates kept (SNS uses a handful); past it the
// oldest is dropped.
const MaxCerts = 64

// New returns a verifier fetching with client (which should go through the
// outbound policy and follow no redirects); extraHosts as Verifier.hosts.
func New(client *http.Client, extraHosts []string, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{hosts: extraHosts, client: client, now: now, window: time.Hour, certs: map[string]*x509.Certificate{}}
}

// allowedURL reports whether u is an https URL on an SNS host or an added
// one.
func (v *Verifier) allowedURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil {
		return nil, fmt.Errorf("%w: %q is not an https URL", ErrInvalid, raw)
	}
	if slices.Contains(v.hosts, u.Host) {
		return u, nil
	}
	if u.Port() == "" && snsHost.MatchString(u.Hostname()) {
		return u, nil
	}
	return nil, fmt.Errorf("%w: %s is not an SNS host", ErrInvalid, u.Host)
}

// Verify checks the message's signature and timestamp.
func (v *Verifier) Verify(ctx context.Context, m *Message) error {
	var h crypto.Hash
	switch m.SignatureVersion {
	case "1":
		h = crypto.SHA1
	case "2":
		h = crypto.SHA256
	default:
		return fmt.Errorf("%w: signature version %q", ErrInvalid, m.SignatureVersion)
	}
	ts, err := time.Parse(time.RFC3339, m.Timestamp)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrInvalid, m.Timestamp)
	}
	if d := v.now().Sub(ts); d > v.window || d < -5*time.Minute {
		return fmt.Errorf("%w: timestamp %s is outside the window", ErrInvalid, m.Timestamp)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrInvalid)
	}
	cert, err := v.cert(ctx, m.SigningCertURL)
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return fmt.Errorf("%w: the signing certificate's key is not RSA", ErrInvalid)
	}
	var sum []byte
	if h == crypto.SHA1 {
		s := sha1.Sum([]byte(m.StringToSign()))
		sum = s[:]
	} else {
		s := sha256.Sum256([]byte(m.StringToSign()))
		sum = s[:]
	}
	if err := rsa.VerifyPKCS1v15(pub, h, sum, sig); err != nil {
		return fmt.Errorf("%w: bad signature", ErrInvalid)
	}
	return nil
}

// certURL is the canonical form of a certificate URL, the cache's key and
// what is fetched. SNS's are https://HOST/NAME.pem: one with a query, a
// fragment or a path that is not clean is refused, since each spelling of
// one certificate would otherwise be fetched and kept on its own, and
// anyone could flush the cache with them.
func certURL(u *url.URL) (*url.URL, error) {
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || path.Clean(u.Path) != u.Path || !strings.HasSuffix(u.Path, ".pem") {
		return nil, fmt.Errorf("%w: the certificate URL is not https://HOST/NAME.pem", ErrInvalid)
	}
	return &url.URL{Scheme: "https", Host: u.Host, Path: u.Path}, nil
}

// cert returns the certificate at raw, fetched once.
func (v *Verifier) cert(ctx context.Context, raw string) (*x509.Certificate, error) {
	u, err := v.allowedURL(raw)
	if err != nil {
		return nil, err
	}
	if u, err = certURL(u); err != nil {
		return nil, err
	}
	key := u.String()
	v.mu.Lock()
	c, ok := v.certs[key]
	v.mu.Unlock()
	if ok {
		return c, nil
	}
	b, err := v.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%w: fetch the signing certificate: %v", ErrInvalid, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: the signing certificate is not PEM", ErrInvalid)
	}
	c, err = x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the signing certificate does not parse", ErrInvalid)
	}
	if now := v.now(); now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, fmt.Errorf("%w: the signing certificate is not valid now", ErrInvalid)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.certs[key]; !ok {
		for len(v.order) >= MaxCerts {
			delete(v.certs, v.order[0])
			v.order = v.order[1:]
		}
		v.order = append(v.order, key)
	}
	v.certs[key] = c
	return c, nil
}

func (v *Verifier) get(ctx context.Context, u *url.URL) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", u.Host, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<10))
}

// Confirm visits a verified SubscriptionConfirmation's SubscribeURL (on
// an SNS host, over HTTPS), which confirms the subscription.
func (v *Verifier) Confirm(ctx context.Context, m *Message) error {
	u, err := v.allowedURL(m.SubscribeURL)
	if err != nil {
		return err
	}
	_, err = v.get(ctx, u)
	return err
}
