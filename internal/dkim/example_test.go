package dkim_test

import (
	"fmt"

	"github.com/sendonce/sendonce/internal/dkim"
)

func ExampleSPFSuggestion() {
	rec, err := dkim.SPFSuggestion("example.com", "192.0.2.10", "include:_spf.relay.example")
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.ZoneLine())
	// Output: example.com. 3600 IN TXT "v=spf1 ip4:192.0.2.10 include:_spf.relay.example ~all"
}

func ExampleDMARCSuggestion() {
	rec, err := dkim.DMARCSuggestion("example.com", "")
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.ZoneLine())
	// Output: _dmarc.example.com. 3600 IN TXT "v=DMARC1; p=none; rua=mailto:dmarc-reports@example.com"
}

func ExampleKey_DNSRecord() {
	key, err := dkim.GenerateKey(dkim.Ed25519)
	if err != nil {
		panic(err)
	}
	rec, err := key.DNSRecord("s1", "example.com")
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Name, rec.Type, rec.Value[:len("v=DKIM1; k=ed25519;")])
	// Output: s1._domainkey.example.com TXT v=DKIM1; k=ed25519;
}

func ExampleSeal() {
	key, err := dkim.GenerateKey(dkim.Ed25519)
	if err != nil {
		panic(err)
	}
	secret := "c2VuZG9uY2UtZXhhbXBsZS1zZWNyZXQtMzItYnl0ZXMhIQ==" // from SENDONCE_SECRET_KEY
	stored, err := dkim.Seal(key, secret)
	if err != nil {
		panic(err)
	}
	back, err := dkim.Open(stored, secret)
	if err != nil {
		panic(err)
	}
	fmt.Println(dkim.IsSealed(stored), back.Type())
	// Output: true ed25519
}
