// Package agent derives the Idempotency-Key of an AI agent's send from what
// the send is for (its intent), so that an agent that calls send_email again
// for the same purpose, however many times, makes one send.
//
// # Derivation, version 1
//
// The key is "mcp-v1:" followed by the lower-case hex SHA-256 of the RFC
// 8785 canonical JSON of
//
//	{"intent": {"kind": K, "reference": R, "period": P | "date": D},
//	 "mailbox": M, "recipients": [A…], "v": 1}
//
// where
//
//   - K is the intent's kind, trimmed and lower-cased (1 to 64 of a-z, 0-9,
//     '.', '_', '-'), e.g. "invoice_reminder";
//   - R is the reference, trimmed, case kept (1 to 200 bytes without
//     control characters), e.g. "INV-1042";
//   - exactly one of P (a period, trimmed, 1 to 64 bytes, e.g. "2026-11" or
//     "2026-W48") or D (a date, YYYY-MM-DD) is present;
//   - M is the mailbox id, "default" when empty;
//   - A… are the bare addresses of every recipient (to, cc and bcc
//     together), lower-cased, without display names, sorted and without
//     duplicates.
//
// What is not in the key: the subject, the body, the template and its
// variables, display names, and which field an address is in. An agent that
// rewords the same reminder gets the same key (and sendonce answers
// idempotency_key_reused instead of sending a second, different mail).
// Changing the derivation changes the version prefix, so keys of two
// versions never collide.
package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// KeyPrefix marks keys of this derivation.
const KeyPrefix = "mcp-v1:"

// Intent says what a send is for.
type Intent struct {
	// Kind is the kind of mail, e.g. "invoice_reminder", "welcome".
	Kind string `json:"kind"`
	// Reference is the business object it concerns, e.g. "INV-1042".
	Reference string `json:"reference"`
	// Period is the period it covers, e.g. "2026-11"; or Date, a day
	// (YYYY-MM-DD). Exactly one of them is set.
	Period string `json:"period,omitempty"`
	Date   string `json:"date,omitempty"`
}

// ErrInvalidIntent wraps every validation error of this package.
var ErrInvalidIntent = errors.New("invalid intent")

var kindPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidIntent, fmt.Sprintf(format, args...))
}

func cleanText(field, s string, maxLen int) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxLen {
		return "", invalid("%s must be 1 to %d bytes", field, maxLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", invalid("%s must not contain control characters", field)
		}
	}
	return s, nil
}

// Normalize validates the intent and returns its canonical form.
func (in Intent) Normalize() (Intent, error) {
	var out Intent
	out.Kind = strings.ToLower(strings.TrimSpace(in.Kind))
	if !kindPattern.MatchString(out.Kind) {
		return Intent{}, invalid("kind must be 1 to 64 of a-z, 0-9, '.', '_', '-' (e.g. invoice_reminder)")
	}
	var err error
	if out.Reference, err = cleanText("reference", in.Reference, 200); err != nil {
		return Intent{}, err
	}
	period, date := strings.TrimSpace(in.Period), strings.TrimSpace(in.Date)
	switch {
	case period != "" && date != "":
		return Intent{}, invalid("give period or date, not both")
	case period != "":
		if out.Period, err = cleanText("period", period, 64); err != nil {
			return Intent{}, err
		}
	case date != "":
		if _, err := time.Parse(time.DateOnly, date); err != nil {
			return Intent{}, invalid("date must be YYYY-MM-DD")
		}
		out.Date = date
	default:
		return Intent{}, invalid("period or date is required (e.g. period \"2026-11\" or date \"2026-11-29\")")
	}
	return out, nil
}

// CanonicalJSON is the intent's RFC 8785 form, as sent in the
// Sendonce-Intent header and written to the audit log.
func (in Intent) CanonicalJSON() (string, error) {
	n, err := in.Normalize()
	if err != nil {
		return "", err
	}
	return canonical(n)
}

func canonical(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	return string(c), nil
}

// Recipients returns the bare addresses of the recipients, lower-cased,
// sorted, without duplicates.
func Recipients(lists ...[]string) ([]string, error) {
	var out []string
	for _, l := range lists {
		for _, raw := range l {
			a, err := mail.ParseAddress(raw)
			if err != nil {
				return nil, invalid("recipient %q is not an address", raw)
			}
			out = append(out, strings.ToLower(a.Address))
		}
	}
	if len(out) == 0 {
		return nil, invalid("at least one recipient is required")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// IntentKey derives the Idempotency-Key of a send (see the package
// documentation). recipients are every recipient of the send, in any form
// net/mail parses; mailbox "" means "default".
func IntentKey(in Intent, recipients []string, mailbox string) (string, error) {
	n, err := in.Normalize()
	if err != nil {
		return "", err
	}
	rcpt, err := Recipients(recipients)
	if err != nil {
		return "", err
	}
	if mailbox == "" {
		mailbox = "default"
	}
	c, err := canonical(struct {
		Intent     Intent   `json:"intent"`
		Mailbox    string   `json:"mailbox"`
		Recipients []string `json:"recipients"`
		V          int      `json:"v"`
	}{n, mailbox, rcpt, 1})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(c))
	return KeyPrefix + hex.EncodeToString(sum[:]), nil
}
