// Package dnscheck checks the DNS records a sending domain needs for its
// mail to be delivered and trusted: MX, SPF, DKIM and DMARC. It is the
// engine of `sendonce dns check`.
//
// Check queries one chosen resolver (by default the first name server of
// /etc/resolv.conf) with github.com/miekg/dns, over UDP with a fallback to
// TCP when an answer is truncated, follows CNAMEs, and caches answers for
// the length of one check. Every conclusion is a Finding with a level (ok,
// warning, error), a sentence saying what was found and, unless it is ok, a
// sentence saying how to fix it. A Report marshals to JSON for --json and
// renders as text with Report.Text.
//
// What is checked:
//
//   - mx: the domain exists and can receive replies and bounces (MX hosts
//     that resolve; no null MX).
//   - spf: exactly one v=spf1 record; its syntax; the 10-DNS-lookup limit
//     of RFC 7208 section 4.6.4, counted through include and redirect (the
//     terms include, a, mx, ptr, exists and redirect count one each); the
//     all qualifier; and, when the relay is known (Options.RelayIPs,
//     Options.RelayHost), whether SPF passes for it.
//   - dkim: the selector's key record exists (through CNAMEs), parses, is
//     RSA of at least 1024 bits (2048 recommended) or Ed25519, is not
//     revoked or in test mode, and is the key sendonce signs with
//     (Options.ExpectedDKIMKey).
//   - dmarc: exactly one record at _dmarc.<domain> (or its organizational
//     domain), its p=, sp=, pct, rua and ruf, and alignment of DKIM and SPF
//     with the From domain.
//   - egress: forward-confirmed reverse DNS of each egress source
//     (Options.Egress), named in its EHLO.
//   - bulk (with Options.Bulk; bulkrules.go, bulktls.go): the sender rules
//     Gmail, Yahoo and Microsoft hold bulk senders to, each finding naming
//     its Rule — SPF at the envelope domain, DKIM, the From domain's
//     alignment with either, DMARC published, reverse DNS of each egress
//     source, STARTTLS offered by the major receivers' exchangers (a probe
//     through transport.Probe and the outbound policy, each bounded by
//     BulkRules.ProbeTimeout: the only connections the check makes besides
//     DNS), and the one-click unsubscribe link's base.
//
// A failed query (timeout, SERVFAIL) becomes an error finding of the check
// that needed it; after a network failure the resolver is considered down
// and later queries fail at once, so an unreachable resolver does not cost
// one timeout per query. Check itself fails only for invalid options or a
// cancelled context.
package dnscheck
