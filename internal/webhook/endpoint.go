package webhook

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/outbound"
)

// MaxEndpointLength bounds an endpoint URL, in bytes.
const MaxEndpointLength = 2048

// resolveTimeout bounds the look-up of an endpoint's host at create and
// update.
const resolveTimeout = 3 * time.Second

// CheckEndpoint validates an endpoint URL given at create or update: http
// or https, a host, no user info, at most MaxEndpointLength bytes, and
// every address its host has now allowed by policy (loopback and private
// ones only with --webhook-allow-private). A host that does not resolve
// now is accepted — DNS may come later — and every connection is checked
// again when it is made. The error is a CodeValidation *core.Error on
// param "endpoint".
func CheckEndpoint(ctx context.Context, raw string, policy *outbound.Policy, r *net.Resolver) error {
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
	if err := checkHost(ctx, host, policy, r); err != nil {
		return bad("endpoint %s: %v (private and loopback endpoints need --webhook-allow-private)", host, err)
	}
	return nil
}

func checkHost(ctx context.Context, host string, policy *outbound.Policy, r *net.Resolver) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return policy.Check(ip)
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		// RFC 6761: always the loopback, whatever a resolver says.
		return policy.Check(netip.IPv6Loopback())
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil // not resolvable now: checked again at connect time
	}
	for _, a := range addrs {
		if err := policy.Check(a); err != nil {
			return err
		}
	}
	return nil
}
