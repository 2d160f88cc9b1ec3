package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"time"

	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/dnsresolve"
	"github.com/sendonce/sendonce/internal/netpolicy"
)

// Defaults applied by NewMX to zero fields of MXConfig.
const (
	DefaultMXPort         = "25"
	DefaultResolvConf     = dnsresolve.DefaultResolvConf
	DefaultDNSTimeout     = 10 * time.Second
	DefaultMaxMXAddresses = 5
	DefaultMaxMXDomains   = 10
)

const (
	maxMXHosts = 10 // mail exchangers considered per domain
)

// MXConfig configures the mx transport, which delivers straight to the
// recipients' mail exchangers.
type MXConfig struct {
	// Resolver is the DNS server queried for MX, A and AAAA records,
	// "host:port". Defaults to the first nameserver of ResolvConf, read at
	// each Deliver.
	Resolver string
	// ResolvConf defaults to /etc/resolv.conf.
	ResolvConf string
	// Port is the SMTP port of the mail exchangers. Defaults to 25; tests
	// set their test server's port.
	Port string
	// HELOName defaults to "localhost"; in production set it to this
	// host's fully qualified name, the one its PTR record gives, or many
	// receivers will distrust the mail.
	HELOName string
	// TLSConfig is optional; it is cloned and its ServerName set to the
	// mail exchanger's name.
	TLSConfig *tls.Config
	// VerifyTLS makes STARTTLS verify the exchanger's certificate against
	// its MX name. By default STARTTLS is opportunistic in the sense of
	// RFC 7435: used whenever offered, certificate not verified (as
	// Postfix's "may" level), since many mail exchangers present
	// certificates that would not verify. Either way, a server that does
	// not offer STARTTLS gets the message in plain text, and a failed
	// handshake is a Temporary failure of that exchanger.
	VerifyTLS bool
	// DialContext opens the TCP connections. Defaults to a net.Dialer with
	// DialTimeout. Tests use it to map exchanger addresses to their
	// servers.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// Policy says which exchanger addresses may be dialled. nil allows
	// global unicast only (see package netpolicy): a domain whose MX points
	// at 127.0.0.1, at a private network or at ::ffff:0.0.0.0 cannot make
	// sendonce deliver to itself or to internal mail hosts. Each address is
	// judged before it is tried and, with the default dialer, again at
	// connect time.
	Policy *netpolicy.Policy

	DNSTimeout     time.Duration // each DNS query; defaults to 10 seconds
	DialTimeout    time.Duration // defaults to 30 seconds
	CommandTimeout time.Duration // defaults to 5 minutes
	DataTimeout    time.Duration // defaults to 10 minutes
	// MaxAddresses bounds the connections tried per recipient domain.
	// Defaults to 5.
	MaxAddresses int
	// MaxDomains bounds the recipient domains of one message. Defaults to
	// 10.
	MaxDomains int

	// Shaping is the traffic shaping of per-destination delivery (Plan and
	// Send); nil is DefaultShaping().
	Shaping *Shaping
	// Sources are the egress sources new connections bind to, in turn
	// (--egress-source); none: the system picks the address.
	Sources []Source
	// Pools group Sources with weights (--egress-pool), StreamPools give
	// a stream a pool (--stream-pool, stream → pool name), and Warmup
	// names the sources warming up and their first day (--egress-warmup):
	// see pools.go. CheckEgress checks that they name what exists.
	Pools       []Pool
	StreamPools map[string]string
	Warmup      map[string]time.Time
	// Now is the warm-up's clock; nil is time.Now. WarmupSchedule
	// replaces the shipped one (tests); nil is WarmupSchedule.
	Now            func() time.Time
	WarmupSchedule []int
	// RootCAs verify exchangers' certificates and MTA-STS policy fetches;
	// nil: the system's roots (--tls-ca adds to them).
	RootCAs *x509.CertPool
	// MTASTS turns MTA-STS (RFC 8461) policy discovery on for Plan.
	MTASTS bool
	// DANE turns DANE (RFC 7672) on for Send: an exchanger whose MX and
	// TLSA answers the resolver validated (the AD bit) gets TLS, and its
	// certificate is checked against the TLSA records (dane.go). Off by
	// default: it is only as sound as the path to a validating resolver.
	DANE bool
	// STSPort is the HTTPS port MTA-STS policies are fetched from;
	// defaults to 443 (tests set another).
	STSPort string
}

func (c MXConfig) withDefaults() MXConfig {
	sessionDefaults(&c.HELOName, &c.DialTimeout, &c.CommandTimeout, &c.DataTimeout)
	defaults.Set(&c.Port, DefaultMXPort)
	defaults.Set(&c.ResolvConf, DefaultResolvConf)
	defaults.Set(&c.DNSTimeout, DefaultDNSTimeout)
	defaults.Set(&c.MaxAddresses, DefaultMaxMXAddresses)
	defaults.Set(&c.MaxDomains, DefaultMaxMXDomains)
	defaults.Set(&c.STSPort, "443")
	return c
}
