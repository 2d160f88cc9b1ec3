package dkim

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	msgdkim "github.com/emersion/go-msgauth/dkim"
)

// SignedHeaders returns the header fields Sign covers, in h= order, when
// the message has them: the originator and recipients, the subject, date
// and identity of the message, the thread, the MIME structure, and the
// one-click unsubscribe headers (RFC 8058 requires them signed), and the
// header naming an agent key's mail (so it cannot be stripped unseen).
func SignedHeaders() []string {
	return []string{
		"From", "Sender", "Reply-To", "To", "Cc", "Subject", "Date",
		"Message-ID", "In-Reply-To", "References",
		"MIME-Version", "Content-Type", "Content-Transfer-Encoding",
		"List-Unsubscribe", "List-Unsubscribe-Post",
		"X-Sendonce-Agent",
	}
}

// Sign returns raw with a DKIM-Signature header field prepended: d=domain,
// s=selector, rsa-sha256 or ed25519-sha256 by key, c=relaxed/relaxed,
// h= listing each SignedHeaders field as many times as the message has it
// and From once more (oversigned), so adding a From breaks the signature.
//
// raw is an RFC 5322 message; bare LF line endings are turned into CRLF
// first (SMTP would do so on the wire, which would break a signature
// computed over LF). The message must have exactly one From field. Sign
// does not check that domain aligns with the From address: FromDomain is
// there for the caller to pick the key. The signature carries the signing
// time (t=), so two calls give different bytes.
func Sign(raw []byte, domain, selector string, key *Key) ([]byte, error) {
	if key == nil {
		return nil, errors.New("dkim: no key")
	}
	d, err := normalizeDomain(domain)
	if err != nil {
		return nil, err
	}
	if err := checkSelector(selector); err != nil {
		return nil, err
	}
	raw = toCRLF(raw)
	counts, err := headerCounts(raw)
	if err != nil {
		return nil, err
	}
	if n := counts["from"]; n != 1 {
		return nil, fmt.Errorf("dkim: message has %d From fields, want exactly one", n)
	}
	var keys []string
	for _, h := range SignedHeaders() {
		n := counts[strings.ToLower(h)]
		if h == "From" {
			n++
		}
		for range n {
			keys = append(keys, h)
		}
	}
	var out bytes.Buffer
	out.Grow(len(raw) + 1024)
	err = msgdkim.Sign(&out, bytes.NewReader(raw), &msgdkim.SignOptions{
		Domain:                 d,
		Selector:               strings.ToLower(selector),
		Signer:                 key.signer,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: msgdkim.CanonicalizationRelaxed,
		BodyCanonicalization:   msgdkim.CanonicalizationRelaxed,
		HeaderKeys:             keys,
	})
	if err != nil {
		return nil, fmt.Errorf("dkim: signing: %w", err)
	}
	return out.Bytes(), nil
}

// FromDomain returns the lower-case domain of the message's single From
// address: the domain whose key signs it and with which DMARC aligns.
func FromDomain(raw []byte) (string, error) {
	m, err := mail.ReadMessage(bytes.NewReader(toCRLF(raw)))
	if err != nil {
		return "", fmt.Errorf("dkim: reading header: %w", err)
	}
	froms := m.Header["From"]
	if len(froms) != 1 {
		return "", fmt.Errorf("dkim: message has %d From fields, want exactly one", len(froms))
	}
	list, err := mail.ParseAddressList(froms[0])
	if err != nil {
		return "", fmt.Errorf("dkim: From: %w", err)
	}
	if len(list) != 1 {
		return "", fmt.Errorf("dkim: From has %d addresses, want exactly one", len(list))
	}
	at := strings.LastIndexByte(list[0].Address, '@')
	if at < 0 {
		return "", errors.New("dkim: From address has no domain")
	}
	return normalizeDomain(list[0].Address[at+1:])
}

// headerCounts counts the header fields of raw (CRLF line endings) by
// lower-case name.
func headerCounts(raw []byte) (map[string]int, error) {
	counts := make(map[string]int)
	for rest := raw; ; {
		i := bytes.Index(rest, []byte("\r\n"))
		if i < 0 {
			return nil, errors.New("dkim: message has no end of header (empty line)")
		}
		line := rest[:i]
		rest = rest[i+2:]
		if len(line) == 0 {
			return counts, nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // folded continuation
		}
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(bytes.TrimSpace(name)) == 0 {
			return nil, errors.New("dkim: malformed header line")
		}
		counts[strings.ToLower(string(bytes.TrimRight(name, " \t")))]++
	}
}

// toCRLF turns bare LF into CRLF, leaving existing CRLF alone.
func toCRLF(b []byte) []byte {
	n := bytes.Count(b, []byte("\n")) - bytes.Count(b, []byte("\r\n"))
	if n == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+n)
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	return out
}
