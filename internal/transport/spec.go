package transport

import (
	"errors"
	"fmt"
	"strings"
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
	// SES and Resend are the providers' configurations; Kind SESKind and
	// ResendKind only.
	SES    SESConfig
	Resend ResendConfig
	raw    string
}

// ParseSpec parses a transport value. "" is an error: callers that have a
// default apply it first.
func ParseSpec(s string) (Spec, error) {
	switch Kind(s) {
	case Capture, Direct:
		return Spec{Kind: Kind(s), raw: s}, nil
	case "":
		return Spec{}, errors.New("transport: empty (want capture, mx or an smtp://, ses:// or resend:// URL)")
	}
	switch providerScheme(s) {
	case SESKind:
		c, err := ParseSESURL(s)
		return Spec{Kind: SESKind, SES: c, raw: s}, err
	case ResendKind:
		c, err := ParseResendURL(s)
		return Spec{Kind: ResendKind, Resend: c, raw: s}, err
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
	return providerScheme(s) == ""
}

// providerScheme is the provider kind a transport value's scheme names, ""
// for none.
func providerScheme(s string) Kind {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	switch k := Kind(strings.ToLower(scheme)); k {
	case SESKind, ResendKind:
		return k
	}
	return ""
}

// IsProvider reports whether a transport value names a provider (ses://,
// resend://), which ParseSpec may still reject.
func IsProvider(s string) bool { return providerScheme(s) != "" }

// String returns the value as it was given (credentials included: not
// for logs; see Redacted).
func (s Spec) String() string { return s.raw }

// Redacted returns the value fit for logs: a relay's password replaced.
func (s Spec) Redacted() string {
	switch s.Kind {
	case Relay:
		return s.SMTP.Redacted()
	case SESKind:
		return s.SES.Redacted()
	case ResendKind:
		return s.Resend.Redacted()
	}
	return string(s.Kind)
}
