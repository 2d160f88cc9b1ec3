// Package verp makes and checks the envelope senders of --bounce-domain:
// bounce+TOKEN@domain, where TOKEN names a send and carries an HMAC of its
// id, so that a report to a forged or altered address matches no send.
package verp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strconv"
	"strings"
)

// SecretName is the name of the deployment's VERP key among the stored
// server secrets (core.Tx.ServerSecret).
const SecretName = "verp"

// macLen is how many bytes of the HMAC a token keeps: 80 bits, more than
// any online guessing can cover (each guess costs an SMTP transaction),
// and short enough that the address stays within the 64 characters a local
// part may have (RFC 5321 section 4.5.3.1.1).
const macLen = 10

const sendPrefix = "snd_"

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrInvalid says an address is not one of ours, or its token does not verify.
var ErrInvalid = errors.New("verp: not a valid bounce address")

// Signer makes and checks bounce addresses under one key and domain.
type Signer struct {
	key    []byte
	domain string
}

// New returns a Signer; domain is the --bounce-domain.
func New(key []byte, domain string) *Signer {
	return &Signer{key: key, domain: strings.ToLower(strings.TrimSuffix(domain, "."))}
}

// Domain is the bounce domain.
func (s *Signer) Domain() string { return s.domain }

func (s *Signer) mac(sendID string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("sendonce-verp-v1\x00"))
	m.Write([]byte(sendID))
	return enc.EncodeToString(m.Sum(nil)[:macLen])
}

// Address returns the envelope sender for a send ("snd_…").
func (s *Signer) Address(sendID string) string {
	return "bounce+" + strings.TrimPrefix(sendID, sendPrefix) + "-" + s.mac(sendID) + "@" + s.domain
}

// macFor is the MAC of a token bound to one recipient: the send's id and
// the recipient's index among the send's recipients, under a label of its
// own so that no send-level token verifies as one.
func (s *Signer) macFor(sendID string, rcpt int) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("sendonce-verp-rcpt-v1\x00"))
	m.Write([]byte(sendID + "\x00" + strconv.Itoa(rcpt)))
	return enc.EncodeToString(m.Sum(nil)[:macLen])
}

// RecipientAddress returns the envelope sender of a transaction that
// carries one recipient of the send, the rcpt-th of its recipients
// (app.RecipientsOf's order): a report to it may speak for that recipient
// only. A recipient sees the bounce address in its own copy's
// Return-Path, so a send-level address would let it report on the others.
func (s *Signer) RecipientAddress(sendID string, rcpt int) string {
	return "bounce+" + strings.TrimPrefix(sendID, sendPrefix) + "." + strconv.Itoa(rcpt) + "-" + s.macFor(sendID, rcpt) + "@" + s.domain
}

// SendID checks a bounce address and returns the send it names; ErrInvalid
// when it is not of our domain or its token does not verify. Case does
// not matter: some relays change the case of local parts.
func (s *Signer) SendID(address string) (string, error) {
	id, _, err := s.Parse(address)
	return id, err
}

// maxRecipientIndex bounds the index a token may carry (a send has far
// fewer recipients), so that the local part stays short.
const maxRecipientIndex = 9999

// Parse checks a bounce address and returns the send it names and the
// recipient index it is bound to, -1 for a send-level address (Address).
func (s *Signer) Parse(address string) (sendID string, rcpt int, err error) {
	a := strings.ToLower(strings.TrimSpace(address))
	local, domain, ok := strings.Cut(a, "@")
	if !ok || domain != s.domain {
		return "", 0, ErrInvalid
	}
	token, ok := strings.CutPrefix(local, "bounce+")
	if !ok {
		return "", 0, ErrInvalid
	}
	id, mac, ok := strings.Cut(token, "-")
	if !ok || id == "" || len(id) > 64 {
		return "", 0, ErrInvalid
	}
	want := ""
	rcpt = -1
	if bare, idx, bound := strings.Cut(id, "."); bound {
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || n > maxRecipientIndex || strconv.Itoa(n) != idx || bare == "" {
			return "", 0, ErrInvalid
		}
		sendID, rcpt = sendPrefix+bare, n
		want = s.macFor(sendID, rcpt)
	} else {
		sendID = sendPrefix + id
		want = s.mac(sendID)
	}
	if !hmac.Equal([]byte(mac), []byte(want)) {
		return "", 0, ErrInvalid
	}
	return sendID, rcpt, nil
}
