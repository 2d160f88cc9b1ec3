package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/idna"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// DefaultSelector is the DKIM selector of a domain added without one.
const DefaultSelector = "s1"

// CheckSecretKey reports whether secret may seal DKIM keys: empty (keys are
// stored unencrypted) or at least dkim.MinSecretLength bytes. The error
// never quotes the secret.
func CheckSecretKey(secret string) error {
	if secret != "" && len(secret) < dkim.MinSecretLength {
		return fmt.Errorf("SENDONCE_SECRET_KEY is %d bytes; it must be at least %d bytes of random (try: openssl rand -base64 32)", len(secret), dkim.MinSecretLength)
	}
	return nil
}

// ResolverAddr validates a DNS resolver setting and returns it as
// "host:port" (port 53 when only a host is given); "" stays "" (the system's
// resolver).
func ResolverAddr(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	return dnsresolve.ParseAddr(s)
}

// NormalizeDomain returns a sending domain in the form it is stored and
// looked up in: lower-case A-labels (IDNA 2008, so "Bücher.example" becomes
// "xn--bcher-kva.example"), without a final dot. It must be a fully
// qualified host name: at least two labels of letters, digits and hyphens,
// at most 253 bytes, and a top-level label that is not all digits (an IP
// address is not a domain).
func NormalizeDomain(s string) (string, error) {
	d := strings.TrimSuffix(strings.TrimSpace(s), ".")
	if d == "" {
		return "", core.Errorf(core.CodeValidation, "domain", "domain is required")
	}
	invalid := core.Errorf(core.CodeValidation, "domain", "%q is not a domain name: want a fully qualified name such as example.com", s)
	a, err := idna.Lookup.ToASCII(d)
	if err != nil {
		return "", invalid
	}
	a = strings.ToLower(a)
	if len(a) > 253 || !dnsresolve.ValidHostName(a) {
		return "", invalid
	}
	labels := strings.Split(a, ".")
	if len(labels) < 2 || strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", invalid
	}
	return a, nil
}

// AddDomainParams describes a sending domain to add.
type AddDomainParams struct {
	Tenant    string // defaults to "default"
	Domain    string
	Selector  string // defaults to DefaultSelector
	Algorithm string // "rsa2048" (the default) or "ed25519"
	// Receive makes the domain receive; CatchAll names the mailbox that
	// takes its otherwise unknown addresses.
	Receive  bool
	CatchAll string
	// Key, when set, is the key adding the domain: CatchAll must be a
	// mailbox it may use.
	Key *core.APIKey
}

// PrepareDomain validates a new sending domain and generates its DKIM key,
// sealed with Config.SecretKey when one is set; AddDomain stores it.
// CodeValidation for a bad name, selector or algorithm. DomainRecords
// gives the records to publish.
//
// It touches no database: an RSA-2048 key takes tens to hundreds of
// milliseconds to generate, and inside a transaction it would hold
// SQLite's one writer, stalling every tenant's writes meanwhile.
func (s *Service) PrepareDomain(p AddDomainParams) (*core.Domain, error) {
	name, err := NormalizeDomain(p.Domain)
	if err != nil {
		return nil, err
	}
	selector := strings.ToLower(strings.TrimSpace(cmp.Or(p.Selector, DefaultSelector)))
	if !dnsresolve.ValidHostName(selector) || len(selector)+len("._domainkey.")+len(name) > 253 {
		return nil, core.Errorf(core.CodeValidation, "selector", "a selector is one or more dot-separated labels of letters, digits and hyphens, such as s1 or mail-2025")
	}
	alg, err := dkim.ParseAlgorithm(p.Algorithm)
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, "algorithm", "algorithm must be rsa2048 or ed25519")
	}
	if err := checkCatchAll(p.Key, p.CatchAll); err != nil {
		return nil, err
	}
	if err := CheckSecretKey(s.cfg.SecretKey); err != nil {
		return nil, err
	}
	key, err := dkim.GenerateKey(alg)
	if err != nil {
		return nil, err
	}
	rec, err := key.DNSRecord(selector, name)
	if err != nil {
		return nil, err
	}
	sealed, err := dkim.Seal(key, s.cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	return &core.Domain{
		Tenant: cmp.Or(p.Tenant, "default"), Domain: name, Selector: selector, Algorithm: string(alg),
		PrivateKey: sealed, PublicRecord: rec.Value, Status: core.DomainNotStarted,
		Receiving: p.Receive || p.CatchAll != "", CatchAll: p.CatchAll, MXHost: s.cfg.InboundName,
	}, nil
}

// AddDomain stores a domain PrepareDomain made. CodeConflict when the
// tenant has the domain already (one selector per domain: remove it first
// to replace the key).
func (s *Service) AddDomain(ctx context.Context, tx core.Tx, d *core.Domain) error {
	d.CreatedAt = s.Now()
	if err := tx.InsertDomain(ctx, d); err != nil {
		return err
	}
	if d.Receiving {
		if d.CatchAll != "" {
			if _, err := s.Mailbox(ctx, d.Tenant, d.CatchAll); err != nil {
				return core.Errorf(core.CodeValidation, "catch_all", "no mailbox %q", d.CatchAll)
			}
		}
		if err := s.checkReceivingClaim(ctx, tx, d.Tenant, "receiving", "@"+d.Domain, true); err != nil {
			return err
		}
		if err := s.addReceiving(ctx, tx, "receiving", core.ReceivingAddress{Address: "@" + d.Domain, Tenant: d.Tenant,
			MailboxID: d.CatchAll, CreatedAt: d.CreatedAt}); err != nil {
			return err
		}
	}
	return s.CheckCap(ctx, tx, core.ResourceDomains, d.Tenant)
}

// Domain returns the tenant's sending domain, whatever form of the name is
// given, with its DKIM keys besides the signing one (DKIMKeys);
// ErrNotFound (also for a name that is not a domain).
func (s *Service) Domain(ctx context.Context, tenant, domain string) (*core.Domain, error) {
	name, err := NormalizeDomain(domain)
	if err != nil {
		return nil, core.ErrNotFound
	}
	d, err := s.store.Domain(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	keys, err := s.store.DKIMKeys(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	s.fillKeys([]*core.Domain{d}, keys)
	return d, s.receivingState(ctx, d)
}

// ListDomains returns the tenant's domains, each with its receiving state
// as Domain gives it: every view (the native list and one, Resend's, the
// dashboard) reads that state here, so none can say another thing.
func (s *Service) ListDomains(ctx context.Context, tenant string) ([]*core.Domain, error) {
	ds, err := s.store.ListDomains(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if err := s.receivingState(ctx, d); err != nil {
			return nil, err
		}
	}
	keys, err := s.store.DKIMKeys(ctx, tenant, "")
	if err != nil {
		return nil, err
	}
	s.fillKeys(ds, keys)
	return ds, nil
}

// receivingState fills d's receiving state (its catch-all route is the
// tenant's) and the MX host its records name.
func (s *Service) receivingState(ctx context.Context, d *core.Domain) error {
	r, err := s.store.ReceivingRoute(ctx, "@"+d.Domain)
	switch {
	case err == nil && r.Tenant == d.Tenant:
		d.Receiving, d.CatchAll = true, r.MailboxID
	case err != nil && !errors.Is(err, core.ErrNotFound):
		return err
	}
	d.MXHost = s.cfg.InboundName
	return nil
}

// RemoveDomain deletes the tenant's domain and its key: its mail is no
// longer signed. ErrNotFound.
func (s *Service) RemoveDomain(ctx context.Context, tenant, domain string) error {
	name, err := NormalizeDomain(domain)
	if err != nil {
		return core.ErrNotFound
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteDomain(ctx, tenant, name) })
}

// KeyEncrypted reports whether the domain's private key is sealed under
// SENDONCE_SECRET_KEY (false: stored in plain text).
func KeyEncrypted(d *core.Domain) bool { return dkim.IsSealed(d.PrivateKey) }

// PublishRecord is a DNS record the owner of a sending domain publishes.
type PublishRecord struct {
	// Purpose is "dkim" (required: the key receivers verify signatures
	// with), "spf" or "dmarc" (suggestions to adapt).
	Purpose string
	dkim.Record
}

// DomainRecords returns the records to publish for d: its DKIM key, an SPF
// suggestion and a DMARC suggestion. They hold no secret.
func DomainRecords(d *core.Domain) ([]PublishRecord, error) {
	spf, err := dkim.SPFSuggestion(d.Domain)
	if err != nil {
		return nil, err
	}
	dmarc, err := dkim.DMARCSuggestion(d.Domain, "")
	if err != nil {
		return nil, err
	}
	recs := []PublishRecord{
		{Purpose: "dkim", Record: txtRecord(d.Selector+"._domainkey."+d.Domain, d.PublicRecord)},
		{Purpose: "spf", Record: spf},
		{Purpose: "dmarc", Record: dmarc},
	}
	if d.Receiving {
		note := "points the domain's mail at sendonce's inbound listener (port 25); see docs/receiving.md"
		host := strings.TrimSuffix(d.MXHost, ".")
		if host == "" {
			// A valid line still: the operator replaces the placeholder
			// with the listener's name (--inbound-name, --mx-host).
			host = "mail." + d.Domain
			note = "replace mail." + d.Domain + " with the name of the host that runs the inbound listener (--inbound-name; --mx-host on the command line), then " + note
		}
		recs = append(recs, PublishRecord{Purpose: "mx", Record: dkim.Record{Name: d.Domain, Type: "MX",
			Value: "10 " + host + ".", Note: note}})
	}
	return recs, nil
}

// txtRecord cuts value into DNS character-strings of at most 255 bytes, as
// dkim.Key.DNSRecord does.
func txtRecord(name, value string) dkim.Record {
	var parts []string
	for rest := value; rest != ""; {
		n := min(len(rest), 255)
		parts = append(parts, rest[:n])
		rest = rest[n:]
	}
	return dkim.Record{Name: name, Type: "TXT", Value: value, Strings: parts}
}

// DNSCheck says what CheckDomain checks.
type DNSCheck struct {
	Tenant string
	Domain string
	// Selector defaults to the stored domain's selector.
	Selector string
	// Resolver ("host:port") defaults to Config.DNSResolver.
	Resolver string
	// RequireStored makes a domain the tenant has not added ErrNotFound;
	// otherwise it is checked without the stored key to compare with.
	RequireStored bool
	// NoSenderRules leaves out the bulk sender rules section, which
	// connects to the major receivers: the periodic verification needs
	// only DKIM.
	NoSenderRules bool
}

// CheckDomain runs the DNS check of a sending domain (dnscheck.Check).
// When the tenant has the domain and the selector is its selector, the
// published DKIM key must be the stored one. DNS failures are findings of
// the report; an error means bad input or a cancelled context.
func (s *Service) CheckDomain(ctx context.Context, c DNSCheck) (*dnscheck.Report, error) {
	name, err := NormalizeDomain(c.Domain)
	if err != nil {
		if c.RequireStored {
			return nil, core.ErrNotFound
		}
		return nil, err
	}
	selector := strings.ToLower(strings.TrimSpace(c.Selector))
	if selector != "" && !dnsresolve.ValidHostName(selector) {
		return nil, core.Errorf(core.CodeValidation, "selector", "a selector is one or more dot-separated labels of letters, digits and hyphens")
	}
	resolver, err := ResolverAddr(cmp.Or(c.Resolver, s.cfg.DNSResolver))
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, "resolver", "%v", err)
	}
	d, err := s.store.Domain(ctx, c.Tenant, name)
	switch {
	case errors.Is(err, core.ErrNotFound):
		if c.RequireStored {
			return nil, err
		}
		d = nil
	case err != nil:
		return nil, err
	}
	opts := dnscheck.Options{Domain: name, Selector: selector, Resolver: resolver, Egress: s.cfg.Egress}
	s.senderRules(&opts, c.NoSenderRules)
	for _, e := range s.cfg.Egress {
		opts.RelayIPs = append(opts.RelayIPs, e.IP) // mail leaves from them: SPF must pass for each
	}
	if d != nil {
		opts.Selector = cmp.Or(opts.Selector, d.Selector)
		if opts.Selector == d.Selector {
			pk, err := dkim.ParsePublicKeyRecord(d.PublicRecord)
			if err != nil {
				return nil, fmt.Errorf("stored DKIM record of %s: %w", name, err)
			}
			opts.ExpectedDKIMKey = pk.PublicKey
		}
	}
	return dnscheck.Check(ctx, opts)
}

// VerifyStatus is the status a DNS check gives a domain: verified when
// the DKIM checks found the published key usable and the stored one (no
// DKIM error, at least one DKIM finding OK), failed otherwise. SPF and
// DMARC are suggestions and MX is about receiving: they do not decide.
func VerifyStatus(rep *dnscheck.Report) core.DomainStatus {
	ok := false
	for _, f := range rep.Findings {
		if f.Check != dnscheck.CheckDKIM {
			continue
		}
		if f.Level == dnscheck.Error {
			return core.DomainFailed
		}
		ok = ok || f.Level == dnscheck.OK
	}
	if !ok {
		return core.DomainFailed
	}
	return core.DomainVerified
}

// VerifyDomain runs the DNS check of the tenant's stored domain d and
// returns the status it gives (failed when the check could not run), for
// RecordDomainStatus to store. Meanwhile, in a transaction of its own, the
// domain reads as pending: a check takes seconds, and readers see it run.
func (s *Service) VerifyDomain(ctx context.Context, d *core.Domain) (core.DomainStatus, error) {
	if err := s.store.InTx(ctx, func(tx core.Tx) error {
		return tx.SetDomainStatus(ctx, d.Tenant, d.Domain, core.DomainPending)
	}); err != nil {
		return "", err
	}
	res, err := s.CheckStoredDomain(ctx, DNSCheck{Tenant: d.Tenant, Domain: d.Domain, NoSenderRules: true}) // a pending DKIM key is promoted when published
	if err != nil {
		return core.DomainFailed, nil
	}
	return VerifyStatus(res.Report), nil
}

// RecordDomainStatus stores the status VerifyDomain gave, in the
// caller's transaction; ErrNotFound.
func (s *Service) RecordDomainStatus(ctx context.Context, tx core.Tx, d *core.Domain, status core.DomainStatus) error {
	return tx.SetDomainStatus(ctx, d.Tenant, d.Domain, status)
}

// DomainMailboxes returns the ids of the tenant's mailboxes whose address
// is at domain (any form of the name): what a key limited to a domain may
// send from. ErrNotFound when the tenant has no such domain.
func (s *Service) DomainMailboxes(ctx context.Context, tenant, domain string) ([]string, error) {
	d, err := s.Domain(ctx, tenant, domain)
	if err != nil {
		return nil, err
	}
	ms, err := s.store.ListMailboxes(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range ms {
		at := strings.LastIndexByte(m.Address, '@')
		if at < 0 {
			continue
		}
		if name, err := NormalizeDomain(m.Address[at+1:]); err == nil && name == d.Domain {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// SignDKIM signs raw, an outgoing message from the address from, with the
// tenant's key for from's domain. Without a key for that domain it returns
// raw unchanged and signed false. Errors (the key cannot be read or opened,
// the message cannot be signed) never contain key material.
func (s *Service) SignDKIM(ctx context.Context, tenant, from string, raw []byte) (out []byte, signed bool, err error) {
	at := strings.LastIndexByte(from, '@')
	if at < 0 {
		return raw, false, nil
	}
	name, err := NormalizeDomain(from[at+1:])
	if err != nil {
		return raw, false, nil // no key is ever stored under such a name
	}
	d, err := s.store.Domain(ctx, tenant, name)
	if errors.Is(err, core.ErrNotFound) {
		return raw, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dkim: reading the key of %s: %w", name, err)
	}
	key, err := dkim.Open(d.PrivateKey, s.cfg.SecretKey)
	if err != nil {
		return nil, false, fmt.Errorf("dkim key of %s (selector %s): %w", name, d.Selector, err)
	}
	out, err = dkim.Sign(raw, d.Domain, d.Selector, key)
	if err != nil {
		return nil, false, fmt.Errorf("dkim signature for %s: %w", name, err)
	}
	return out, true, nil
}
