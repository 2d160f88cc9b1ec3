package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/emersion/go-smtp"
)

// A session to one exchanger address, taken through greeting, STARTTLS
// and EHLO under the TLS policy (DANE, MTA-STS, --mx-verify-tls), and
// kept between messages by the destination's shaping.

// dialSession connects to one exchanger address from src and takes the
// session through greeting, STARTTLS (whenever offered; required when
// needTLS or dp asks, and verified when needVerified) and EHLO.
func (m *MX) dialSession(ctx context.Context, host string, ip netip.Addr, needVerified, needTLS bool, dp *danePolicy, src *Source) (*pooled, error) {
	cfg := m.cfg
	p := &pooled{host: host, ip: ip, src: src}
	tc := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	if cfg.TLSConfig != nil {
		tc = cfg.TLSConfig.Clone()
		tc.ServerName = host
	}
	roots := cfg.RootCAs
	if tc.RootCAs != nil {
		roots = tc.RootCAs
	}
	tc.InsecureSkipVerify = true // verified below, so that an unverified session can still be used where allowed
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if dp != nil && len(dp.records) > 0 {
			// DANE decides, before MTA-STS and the CAs (dane.go).
			err := dp.verify(cs, host)
			p.verified, p.dane, p.tlsWhy = err == nil, err == nil, ""
			if err != nil {
				p.tlsWhy = err.Error()
			}
			return err
		}
		err := verifyChain(cs, host, roots)
		p.verified, p.tlsWhy = err == nil, ""
		if err != nil {
			p.tlsWhy = err.Error()
			if needVerified {
				return err
			}
		}
		return nil
	}
	mode := TLSOpportunistic
	if needVerified || dp != nil || needTLS {
		mode = TLSStartTLS // DANE's TLSA records make TLS mandatory, usable or not
	}
	dial := cfg.DialContext
	if dial == nil {
		dialer := cfg.Policy.Dialer(cfg.DialTimeout)
		if src != nil && src.IP.IsValid() {
			dialer.LocalAddr = &net.TCPAddr{IP: src.IP.AsSlice()}
		}
		dial = dialer.DialContext
	}
	helo := cfg.HELOName
	if src != nil && src.EHLO != "" {
		helo = src.EHLO
	}
	p.cfg = &SMTPConfig{
		Host: ip.String(), Port: cfg.Port, TLS: mode, TLSConfig: tc, HELOName: helo,
		DialContext: dial, DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.CommandTimeout, DataTimeout: cfg.DataTimeout,
	}
	a := &attempt{cfg: p.cfg, stage: StageDial}
	ss, stop, err := a.session(ctx)
	if err != nil {
		return nil, err
	}
	stop() // the session outlives this attempt's context (pooled); each transaction watches its own
	p.ss, p.secure = ss, a.secure
	if cs, ok := ss.nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		p.version = cs.ConnectionState().Version
	} else if rc, ok := ss.nc.(*replayConn); ok {
		if tcn, ok := rc.Conn.(*tls.Conn); ok {
			p.version = tcn.ConnectionState().Version
		}
	}
	if !p.secure {
		p.verified, p.tlsWhy = false, "the server did not offer STARTTLS"
	}
	return p, nil
}

// verifyChain checks the peer's certificate against roots (nil: the
// system's) for host.
func verifyChain(cs tls.ConnectionState, host string, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no certificate")
	}
	opts := x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// pooled is an open session to an exchanger, between messages.
type pooled struct {
	ss       *session
	cfg      *SMTPConfig
	host     string
	ip       netip.Addr
	src      *Source
	secure   bool // STARTTLS in effect
	verified bool // and the certificate verified for host
	dane     bool // by its TLSA records
	tlsWhy   string
	version  uint16
	msgs     int
	timer    *time.Timer
}

func (p *pooled) c() *smtp.Client { return p.ss.c }

func (p *pooled) tlsState() string {
	if !p.secure {
		return "none (" + p.tlsWhy + ")"
	}
	v := tls.VersionName(p.version)
	if p.dane {
		return v + ", certificate verified by DANE (TLSA)"
	}
	if p.verified {
		return v + ", certificate verified"
	}
	return v + ", certificate not verified: " + p.tlsWhy
}

func (p *pooled) quit() {
	p.ss.c.CommandTimeout = min(p.cfg.CommandTimeout, quitTimeout)
	_ = p.ss.c.Quit()
	p.ss.raw.Close()
}

func (p *pooled) close() { p.ss.raw.Close() }
