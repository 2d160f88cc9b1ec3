package transport

import (
	"errors"
	"fmt"
)

// Kind is what a transport spec names.
type Kind string

const (
	// Capture keeps mail in the local inbox (development).
	Capture Kind = "capture"
	// Direct is the mx transport: straight to the recipients' exchangers.
	Direct Kind = "mx"
	// Relay is an SMTP relay, given as an smtp:// or smtps:// URL.
	Relay Kind = "smtp"
)

// DefaultSpec is the --transport of a server not told otherwise.
const DefaultSpec = string(Capture)

// Spec is a parsed --transport (or mailbox transport) value: "capture",
// "mx", or an SMTP relay URL (see ParseSMTPURL).
type Spec struct {
	Kind Kind
	// SMTP is the relay's configuration; Kind Relay only.
	SMTP SMTPConfig
	raw  string
}

// ParseSpec parses a transport value. "" is an error: callers that have a
// default apply it first.
func ParseSpec(s string) (Spec, error) {
	switch Kind(s) {
	case Capture, Direct:
		return Spec{Kind: Kind(s), raw: s}, nil
	case "":
		return Spec{}, errors.New("transport: empty (want capture, mx or an smtp:// URL)")
	}
	c, err := ParseSMTPURL(s)
	if err != nil {
		return Spec{}, fmt.Errorf("transport: %w", err)
	}
	return Spec{Kind: Relay, SMTP: c, raw: s}, nil
}

// IsRelay reports whether a transport value names an SMTP relay: anything
// but "", "capture" and "mx" (which ParseSpec may still reject).
func IsRelay(s string) bool {
	switch Kind(s) {
	case "", Capture, Direct:
		return false
	}
	return true
}

// String returns the value as it was given (credentials included: not
// for logs; see Redacted).
func (s Spec) String() string { return s.raw }

// Redacted returns the value fit for logs: a relay's password replaced.
func (s Spec) Redacted() string {
	if s.Kind == Relay {
		return s.SMTP.Redacted()
	}
	return string(s.Kind)
}
