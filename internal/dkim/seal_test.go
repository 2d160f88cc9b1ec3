package dkim_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/dkim"
)

const secret = "c2VuZG9uY2UtdGVzdC1zZWNyZXQta2V5LTMyLWJ5dGVzIQ==" // 48 bytes

func TestSealOpen(t *testing.T) {
	for _, alg := range []dkim.Algorithm{dkim.RSA2048, dkim.Ed25519} {
		k := testKey(t, alg)
		stored, err := dkim.Seal(k, secret)
		if err != nil {
			t.Fatalf("%s: Seal: %v", alg, err)
		}
		if !dkim.IsSealed(stored) {
			t.Errorf("%s: IsSealed = false for a sealed key", alg)
		}
		plain, _ := k.MarshalPEM()
		if bytes.Contains(stored, plain[30:60]) {
			t.Errorf("%s: the sealed form contains the plaintext PEM", alg)
		}
		back, err := dkim.Open(stored, secret)
		if err != nil {
			t.Fatalf("%s: Open: %v", alg, err)
		}
		if !samePublic(back, k) {
			t.Errorf("%s: Open returned another key", alg)
		}
		again, _ := dkim.Seal(k, secret)
		if bytes.Equal(again, stored) {
			t.Errorf("%s: two Seals gave the same bytes; salt and nonce must be random", alg)
		}
	}
}

func TestSealWithoutSecretIsPlaintextPEM(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	stored, err := dkim.Seal(k, "")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := k.MarshalPEM()
	if !bytes.Equal(stored, plain) || dkim.IsSealed(stored) {
		t.Fatalf("Seal without secret = %q, want the plaintext PEM", stored)
	}
	// Plaintext opens with or without a secret (so a secret can be added
	// later and the key resealed).
	for _, s := range []string{"", secret} {
		back, err := dkim.Open(stored, s)
		if err != nil || !samePublic(back, k) {
			t.Errorf("Open(plaintext, %q) = %v", s, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	stored, err := dkim.Seal(k, secret)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(stored)
	tamper := func(i int) []byte {
		b := bytes.Clone(block.Bytes)
		b[i] ^= 1
		return pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: b})
	}
	tests := []struct {
		name   string
		stored []byte
		secret string
		is     error  // errors.Is target, or nil
		want   string // substring otherwise
	}{
		{"no secret", stored, "", dkim.ErrSecretRequired, ""},
		{"wrong secret", stored, strings.Repeat("x", 40), dkim.ErrWrongSecret, ""},
		{"short secret", stored, "short", nil, "at least 32 bytes"},
		{"tampered salt", tamper(1), secret, dkim.ErrWrongSecret, ""},
		{"tampered nonce", tamper(20), secret, dkim.ErrWrongSecret, ""},
		{"tampered ciphertext", tamper(40), secret, dkim.ErrWrongSecret, ""},
		{"tampered tag", tamper(len(block.Bytes) - 1), secret, dkim.ErrWrongSecret, ""},
		{"unknown version", tamper(0), secret, nil, "unknown format version"},
		{"truncated", pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes[:20]}), secret, nil, "truncated"},
		{"not PEM", []byte("nope"), secret, nil, "not PEM"},
		{"trailing data", append(bytes.Clone(stored), "junk"...), secret, nil, "unexpected data"},
	}
	for _, tt := range tests {
		_, err := dkim.Open(tt.stored, tt.secret)
		switch {
		case err == nil:
			t.Errorf("%s: Open succeeded", tt.name)
		case tt.is != nil && !errors.Is(err, tt.is):
			t.Errorf("%s: Open = %v, want %v", tt.name, err, tt.is)
		case tt.is == nil && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: Open = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := dkim.Seal(k, "short"); err == nil {
		t.Error("Seal with a short secret succeeded")
	}
}

// TestSealFormat opens a sealed key with an independent implementation of
// the format the package documentation describes, so the documentation
// stays true.
func TestSealFormat(t *testing.T) {
	k := testKey(t, dkim.RSA2048)
	stored, err := dkim.Seal(k, secret)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(stored)
	if block == nil || block.Type != "SENDONCE ENCRYPTED PRIVATE KEY" || len(rest) != 0 {
		t.Fatalf("sealed form is not one PEM block of the documented type: %q", stored)
	}
	b := block.Bytes
	if b[0] != 1 {
		t.Fatalf("version byte = %d, want 1", b[0])
	}
	header, nonce, ct := b[:17], b[17:29], b[29:]
	key, err := hkdf.Key(sha256.New, []byte(secret), header[1:], "sendonce dkim private key v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(blk)
	der, err := gcm.Open(nil, nonce, ct, header)
	if err != nil {
		t.Fatalf("documented derivation does not open the key: %v", err)
	}
	want, _ := x509.MarshalPKCS8PrivateKey(k.Signer())
	if !bytes.Equal(der, want) {
		t.Error("plaintext is not the PKCS#8 DER of the key")
	}
}
