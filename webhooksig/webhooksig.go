// Package webhooksig signs and verifies webhook deliveries as Standard
// Webhooks (https://www.standardwebhooks.com) defines them, which is what
// sendonce sends and what Resend's SDKs verify:
//
//	webhook-id:        the event's id, the same on every retry
//	webhook-timestamp: Unix seconds of the attempt
//	webhook-signature: v1,<base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}">
//
// The HMAC key is the base64 decoding of the secret after its "whsec_"
// prefix. The header may hold several space-separated signatures (during a
// secret rotation a sender may sign with both); one valid one is enough.
package webhooksig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// secretBytes is the length of a new secret's key: 32 bytes, HMAC-SHA256's
// block-size half and what Svix issues.
const secretBytes = 32

// DefaultTolerance is how far a timestamp may be from now, either way.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify; every error it returns has one of them in its chain.
var (
	ErrMissingHeaders = errors.New("webhooksig: webhook-id, webhook-timestamp or webhook-signature is missing")
	ErrTimestamp      = errors.New("webhooksig: webhook-timestamp is invalid or outside the tolerance")
	ErrSignature      = errors.New("webhooksig: no valid signature")
	ErrSecret         = errors.New("webhooksig: the secret is not whsec_ followed by base64")
)

// NewSecret returns a new random signing secret, "whsec_" + base64.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhooksig: read random: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

func key(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(k) == 0 {
		return nil, ErrSecret
	}
	return k, nil
}

func mac(k []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(ts, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the webhook-signature value ("v1,…") of body sent with
// webhook-id id at timestamp ts.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	k, err := key(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(k, id, ts.Unix(), body)), nil
}

// SetHeaders signs body and sets the three headers on h.
func SetHeaders(h http.Header, secret, id string, ts time.Time, body []byte) error {
	sig, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return nil
}

// Verify checks a delivery's headers against its raw body, as received:
// the signature must be one of secret's and the timestamp within
// tolerance of now (DefaultTolerance when tolerance is 0). Receivers should
// also de-duplicate on webhook-id: a delivery may come more than once.
func Verify(secret string, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	id, tsText, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now", ErrTimestamp, d.Round(time.Second))
	}
	k, err := key(secret)
	if err != nil {
		return err
	}
	want := mac(k, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}
