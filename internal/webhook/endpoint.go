package webhook

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/netpolicy"
)

// MaxEndpointLength bounds an endpoint URL, in bytes.
const MaxEndpointLength = 2048

// CheckEndpoint validates an endpoint URL given at create or update: http
// or https, a host, no user info, at most MaxEndpointLength bytes, and an
// address literal (or localhost) allowed by policy (loopback and private
// ones only with --webhook-allow-private). A name is judged at every
// connection, not here (checkHost says why). The error is a
// CodeValidation *core.Error on param "endpoint".
func CheckEndpoint(raw string, policy *netpolicy.Policy) error {
	bad := func(format string, args ...any) error {
		return core.Errorf(core.CodeValidation, "endpoint", format, args...)
	}
	if raw == "" {
		return bad("endpoint is required")
	}
	if len(raw) > MaxEndpointLength {
		return bad("endpoint is longer than %d bytes", MaxEndpointLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return bad("endpoint must be an absolute http:// or https:// URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("endpoint must be http:// or https://, not %s://", u.Scheme)
	}
	if u.User != nil {
		return bad("endpoint must not carry user info: the signature authenticates sendonce")
	}
	host := u.Hostname()
	if host == "" {
		return bad("endpoint has no host")
	}
	if strings.ContainsAny(raw, "\r\n\t ") {
		return bad("endpoint must not contain whitespace")
	}
	if err := checkHost(host, policy); err != nil {
		return bad("endpoint %s is an address sendonce may not reach (private and loopback endpoints need --webhook-allow-private)", host)
	}
	return nil
}

// checkHost judges an address literal (and localhost) now. A name is not
// resolved here: whether it resolves to an address sendonce may not reach
// would be an oracle of the operator's internal DNS for whoever creates
// webhooks; every connection is judged when it is made, and an attempt
// refused so says only that (attemptError).
func checkHost(host string, policy *netpolicy.Policy) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return policy.Check(ip)
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		// RFC 6761: always the loopback, whatever a resolver says.
		return policy.Check(netip.IPv6Loopback())
	}
	return nil
}
