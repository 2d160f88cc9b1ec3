package dkim_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/internal/dkim"
)

// testKeys generates one key per algorithm, once per test binary: RSA
// generation takes a while under the race detector.
var testKeys = sync.OnceValues(func() (map[dkim.Algorithm]*dkim.Key, error) {
	keys := make(map[dkim.Algorithm]*dkim.Key)
	for _, alg := range []dkim.Algorithm{dkim.RSA2048, dkim.Ed25519} {
		k, err := dkim.GenerateKey(alg)
		if err != nil {
			return nil, err
		}
		keys[alg] = k
	}
	return keys, nil
})

func testKey(t *testing.T, alg dkim.Algorithm) *dkim.Key {
	t.Helper()
	keys, err := testKeys()
	if err != nil {
		t.Fatalf("GenerateKey: %v", err)
	}
	return keys[alg]
}

func TestParseAlgorithm(t *testing.T) {
	for in, want := range map[string]dkim.Algorithm{"": dkim.RSA2048, "rsa2048": dkim.RSA2048, "RSA2048": dkim.RSA2048, " ed25519 ": dkim.Ed25519} {
		got, err := dkim.ParseAlgorithm(in)
		if err != nil || got != want {
			t.Errorf("ParseAlgorithm(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"rsa", "rsa1024", "ecdsa"} {
		if _, err := dkim.ParseAlgorithm(in); err == nil {
			t.Errorf("ParseAlgorithm(%q) succeeded", in)
		}
	}
	if _, err := dkim.GenerateKey("rsa4096"); err == nil {
		t.Error("GenerateKey(rsa4096) succeeded")
	}
}

func TestGenerateKey(t *testing.T) {
	tests := []struct {
		alg      dkim.Algorithm
		typ      string
		bits     int
		pubCheck func(any) bool
	}{
		{dkim.RSA2048, "rsa", 2048, func(p any) bool { _, ok := p.(*rsa.PublicKey); return ok }},
		{dkim.Ed25519, "ed25519", 256, func(p any) bool { _, ok := p.(ed25519.PublicKey); return ok }},
	}
	for _, tt := range tests {
		k := testKey(t, tt.alg)
		if k.Type() != tt.typ || k.Bits() != tt.bits || !tt.pubCheck(k.Public()) {
			t.Errorf("%s: Type=%q Bits=%d Public=%T", tt.alg, k.Type(), k.Bits(), k.Public())
		}
		if k.Signer().Public() == nil {
			t.Errorf("%s: Signer has no public key", tt.alg)
		}
	}
}

func TestPEMRoundTrip(t *testing.T) {
	for _, alg := range []dkim.Algorithm{dkim.RSA2048, dkim.Ed25519} {
		k := testKey(t, alg)
		p, err := k.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(p)
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("%s: MarshalPEM is not a PKCS#8 PEM block: %q", alg, p)
		}
		if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
			t.Fatalf("%s: not PKCS#8: %v", alg, err)
		}
		back, err := dkim.ParsePEM(p)
		if err != nil {
			t.Fatalf("%s: ParsePEM: %v", alg, err)
		}
		if !samePublic(back, k) {
			t.Errorf("%s: round trip changed the key", alg)
		}
	}
}

func samePublic(a, b *dkim.Key) bool { return equalPublic(a.Public(), b.Public()) }

func equalPublic(a, b crypto.PublicKey) bool {
	pa, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pa.Equal(b)
}

func TestParsePEMPKCS1(t *testing.T) {
	k := testKey(t, dkim.RSA2048)
	der := x509.MarshalPKCS1PrivateKey(k.Signer().(*rsa.PrivateKey))
	back, err := dkim.ParsePEM(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatalf("ParsePEM(PKCS#1): %v", err)
	}
	if !samePublic(back, k) {
		t.Error("PKCS#1 import changed the key")
	}
}

func TestParsePEMErrors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	secretish := "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDc" // must never be echoed
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"not PEM", []byte("hello"), "no PEM block"},
		{"certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), "unsupported PEM block"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte(secretish)}), "parsing private key"},
		{"ECDSA", read("ecdsa.pem"), "unsupported key type"},
		{"512-bit RSA", read("rsa512.pem"), "512"},
	}
	for _, tt := range tests {
		_, err := dkim.ParsePEM(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParsePEM = %v, want an error containing %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), secretish) {
			t.Errorf("%s: error echoes key material: %v", tt.name, err)
		}
	}
}

func TestNewKey(t *testing.T) {
	ec, err := dkim.ParsePEM([]byte("x"))
	if err == nil || ec != nil {
		t.Fatal("ParsePEM of garbage succeeded")
	}
	block, _ := pem.Decode(mustRead(t, "testdata/ecdsa.pem"))
	ecKey, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dkim.NewKey(ecKey.(*ecdsa.PrivateKey)); err == nil {
		t.Error("NewKey(ECDSA) succeeded")
	}
	_, priv, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	k, err := dkim.NewKey(&priv)
	if err != nil || k.Type() != "ed25519" {
		t.Errorf("NewKey(*ed25519.PrivateKey) = %v, %v", k, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
