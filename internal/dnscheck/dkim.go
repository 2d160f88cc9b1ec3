package dnscheck

import (
	"crypto"
	"fmt"
	"slices"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/dkim"
)

// DKIM key sizes (RFC 8301 section 3.2).
const (
	dkimMinBits         = 1024 // receivers ignore signatures by shorter keys
	dkimRecommendedBits = 2048
	dkimMaxBits         = 4096 // receivers need not verify longer keys
)

func (c *checker) checkDKIM() {
	if c.selector == "" {
		c.warn(CheckDKIM, "No DKIM selector was given, so the DKIM key was not checked.",
			"Run the check again with --selector and the selector the domain signs with (the one `sendonce domains add` printed).")
		return
	}
	name := c.selector + "._domainkey." + c.domain
	a, err := c.lookup(name, dns.TypeTXT)
	if err != nil {
		c.lookupFailed(CheckDKIM, err)
		return
	}
	where := name
	if len(a.Chain) > 0 {
		where = a.Chain[len(a.Chain)-1]
		if a.NXDomain {
			c.fail(CheckDKIM, fmt.Sprintf("%s is an alias (CNAME) of %s, which does not exist, so receivers find no key.", name, where),
				fmt.Sprintf("Publish the key record at %s, or point the alias at the name your provider gave you.", where))
			return
		}
		c.ok(CheckDKIM, "%s is an alias (CNAME) of %s; the key was read there.", name, where)
	}
	recs := a.TXT()
	switch len(recs) {
	case 0:
		c.fail(CheckDKIM, fmt.Sprintf("There is no DKIM key record at %s, so receivers cannot verify the signatures of %s.", where, c.domain),
			fmt.Sprintf("Publish the TXT record printed by `sendonce domains add %s --selector %s` at %s.", c.domain, c.selector, where))
		return
	case 1:
	default:
		c.fail(CheckDKIM, fmt.Sprintf("%s has %d TXT records; receivers cannot tell which is the key (RFC 6376 section 3.6.2.2) and fail the signature.", where, len(recs)),
			"Keep only the DKIM key record at that name.")
		return
	}
	rec, err := dkim.ParsePublicKeyRecord(recs[0])
	if err != nil {
		c.fail(CheckDKIM, fmt.Sprintf("The DKIM key record at %s does not parse: %v.", where, err),
			"Publish the record exactly as `sendonce domains add` printed it; when it is split into several strings, they must join without spaces.")
		return
	}
	if rec.Revoked {
		c.fail(CheckDKIM, fmt.Sprintf("The DKIM key at %s is revoked (empty p=), so every signature with selector %s fails.", where, c.selector),
			"Sign with another selector whose key is published, or publish a new key record here.")
		return
	}
	c.dkimKeyStrength(rec, where)
	c.dkimKeyTags(rec, where)
	if c.opts.ExpectedDKIMKey != nil {
		if eq, ok := c.opts.ExpectedDKIMKey.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(rec.PublicKey) {
			c.ok(CheckDKIM, "The published key is the one sendonce signs %s's mail with.", c.domain)
		} else {
			c.fail(CheckDKIM, fmt.Sprintf("The key published at %s is not the one sendonce signs with, so every signature fails.", where),
				fmt.Sprintf("Publish the record printed by `sendonce domains add` for %s (selector %s) in place of the current one.", c.domain, c.selector))
		}
	}
}

// dkimKeyStrength judges the key's algorithm and size (RFC 8301, RFC 8463).
func (c *checker) dkimKeyStrength(rec *dkim.PublicKeyRecord, where string) {
	switch {
	case rec.KeyType == "ed25519":
		c.ok(CheckDKIM, "The DKIM key at %s is Ed25519.", where)
		c.warn(CheckDKIM, "Not every receiver verifies Ed25519 signatures (RFC 8463) yet; those treat mail signed only with Ed25519 as unsigned.",
			fmt.Sprintf("Sign with an RSA-2048 key: `sendonce domains add %s --algorithm rsa2048` with a new selector.", c.domain))
	case rec.Bits < dkimMinBits:
		c.fail(CheckDKIM, fmt.Sprintf("The DKIM key at %s is RSA of %d bits: receivers ignore signatures made with keys under %d bits (RFC 8301), so the mail counts as unsigned.", where, rec.Bits, dkimMinBits),
			fmt.Sprintf("Generate a 2048-bit key under a new selector (`sendonce domains add %s --selector <new>`), publish it, and sign with it.", c.domain))
	case rec.Bits < dkimRecommendedBits:
		c.warn(CheckDKIM, fmt.Sprintf("The DKIM key at %s is RSA of %d bits; %d bits is recommended, and some receivers already distrust shorter keys.", where, rec.Bits, dkimRecommendedBits),
			"Rotate to a 2048-bit key under a new selector.")
	case rec.Bits > dkimMaxBits:
		c.warn(CheckDKIM, fmt.Sprintf("The DKIM key at %s is RSA of %d bits; receivers need not verify keys over %d bits (RFC 8301).", where, rec.Bits, dkimMaxBits),
			"Use a 2048-bit key.")
	default:
		c.ok(CheckDKIM, "The DKIM key at %s is RSA of %d bits.", where, rec.Bits)
	}
}

// dkimKeyTags judges the record's t=, h= and s= tags.
func (c *checker) dkimKeyTags(rec *dkim.PublicKeyRecord, where string) {
	if rec.Testing {
		c.warn(CheckDKIM, fmt.Sprintf("The DKIM key at %s is in test mode (t=y): receivers may treat signed mail as unsigned.", where),
			"Remove t=y from the record once signing works.")
	}
	if rec.HashAlgorithms != nil && !slices.Contains(rec.HashAlgorithms, "sha256") {
		c.fail(CheckDKIM, fmt.Sprintf("The DKIM key at %s allows only h=%v, but signatures use sha256, so they fail.", where, rec.HashAlgorithms),
			"Remove the h= tag from the record.")
	}
	if rec.Services != nil && !slices.Contains(rec.Services, "email") && !slices.Contains(rec.Services, "*") {
		c.fail(CheckDKIM, fmt.Sprintf("The DKIM key at %s is restricted to services %v, not email, so signatures fail.", where, rec.Services),
			"Remove the s= tag from the record.")
	}
}
