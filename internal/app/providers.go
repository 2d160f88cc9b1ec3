package app

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// checkMailboxTransport judges a mailbox's transport: an smtp:// relay, or
// a provider (ses://, resend://). A host given as an address literal is
// judged by the outbound policy now; a name is judged each time it is
// dialled, on what it resolves to then. A provider a tenant sets must
// carry its own credentials: without them the SDK's default chain would
// send on the operator's AWS account.
func (s *Service) checkMailboxTransport(u string) error {
	const param = "transport"
	spec, err := transport.ParseSpec(u)
	if err != nil || (spec.Kind != transport.Relay && spec.Kind != transport.SESKind && spec.Kind != transport.ResendKind) {
		msg := "transport must be an smtp://, ses:// or resend:// URL"
		if err != nil {
			msg += ": " + err.Error()
		}
		return core.Errorf(core.CodeValidation, param, "%s", msg)
	}
	host := ""
	switch spec.Kind {
	case transport.Relay:
		host = spec.SMTP.Host
	case transport.SESKind:
		if spec.SES.AccessKeyID == "" {
			return core.Errorf(core.CodeValidation, param, "a mailbox's ses:// transport needs its own credentials (ses://ACCESS_KEY_ID:SECRET@REGION)")
		}
		if spec.SES.Endpoint != "" {
			if e, err := url.Parse(spec.SES.Endpoint); err == nil {
				host = e.Hostname()
			}
		}
	case transport.ResendKind:
		if h, _, err := net.SplitHostPort(spec.Resend.Host); err == nil {
			host = h
		} else {
			host = spec.Resend.Host
		}
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if err := s.cfg.Outbound.Check(ip); err != nil {
			return core.Errorf(core.CodeValidation, param, "the transport's address is not one sendonce may connect to (loopback, private and reserved ranges need the operator's --outbound-allow)")
		}
	}
	return nil
}
