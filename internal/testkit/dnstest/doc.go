// Package dnstest runs a DNS server, built on github.com/miekg/dns, that
// answers from an in-memory zone, for tests of code that queries DNS through
// a chosen resolver (DKIM verification, the DNS check, the mx transport).
//
// The server listens on 127.0.0.1 only, on one port for both UDP and TCP,
// and behaves like a small recursive resolver that knows only its records:
// it answers authoritatively, follows CNAMEs within its data, answers
// NXDOMAIN for names it does not know and NODATA for known names without the
// asked type. Options make it truncate UDP answers (to exercise TCP
// fallback), stop following CNAMEs, or fail chosen names with SERVFAIL. It
// records every query it receives and is shut down by t.Cleanup.
package dnstest
