package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// Algorithm names a kind of key GenerateKey can make.
type Algorithm string

const (
	// RSA2048 is a 2048-bit RSA key signing rsa-sha256, the algorithm every
	// receiver verifies. It is the default.
	RSA2048 Algorithm = "rsa2048"
	// Ed25519 is an Ed25519 key signing ed25519-sha256 (RFC 8463): short
	// records, but not every receiver verifies it yet.
	Ed25519 Algorithm = "ed25519"
)

// MinRSABits is the smallest RSA key ParsePEM accepts: receivers must
// ignore signatures made with shorter keys (RFC 8301 section 3.2).
const MinRSABits = 1024

// ParseAlgorithm parses "rsa2048" or "ed25519" (case-insensitive); the
// empty string means RSA2048.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch a := Algorithm(strings.ToLower(strings.TrimSpace(s))); a {
	case "":
		return RSA2048, nil
	case RSA2048, Ed25519:
		return a, nil
	}
	return "", fmt.Errorf("dkim: unknown algorithm %q (want rsa2048 or ed25519)", s)
}

// Key is a DKIM private key: RSA or Ed25519.
type Key struct {
	signer crypto.Signer // *rsa.PrivateKey or ed25519.PrivateKey
}

// GenerateKey makes a new key with crypto/rand.
func GenerateKey(alg Algorithm) (*Key, error) {
	switch alg {
	case RSA2048, "":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("dkim: generating RSA key: %w", err)
		}
		return &Key{signer: k}, nil
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("dkim: generating Ed25519 key: %w", err)
		}
		return &Key{signer: k}, nil
	}
	return nil, fmt.Errorf("dkim: unknown algorithm %q (want rsa2048 or ed25519)", string(alg))
}

// NewKey wraps an existing *rsa.PrivateKey (at least MinRSABits) or
// ed25519.PrivateKey.
func NewKey(signer crypto.Signer) (*Key, error) {
	switch k := signer.(type) {
	case *rsa.PrivateKey:
		if bits := k.N.BitLen(); bits < MinRSABits {
			return nil, fmt.Errorf("dkim: RSA key of %d bits is too short (minimum %d, 2048 recommended)", bits, MinRSABits)
		}
		return &Key{signer: k}, nil
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return nil, errors.New("dkim: malformed Ed25519 private key")
		}
		return &Key{signer: k}, nil
	case *ed25519.PrivateKey:
		return NewKey(*k)
	}
	return nil, fmt.Errorf("dkim: unsupported key type %T (want RSA or Ed25519)", signer)
}

// Type returns the DKIM key type, the k= tag: "rsa" or "ed25519".
func (k *Key) Type() string {
	if _, ok := k.signer.(ed25519.PrivateKey); ok {
		return "ed25519"
	}
	return "rsa"
}

// Bits returns the RSA modulus size, or 256 for Ed25519.
func (k *Key) Bits() int {
	if r, ok := k.signer.(*rsa.PrivateKey); ok {
		return r.N.BitLen()
	}
	return 256
}

// Signer returns the private key.
func (k *Key) Signer() crypto.Signer { return k.signer }

// Public returns the public key: *rsa.PublicKey or ed25519.PublicKey.
func (k *Key) Public() crypto.PublicKey { return k.signer.Public() }

// PublicKeyData returns the base64 of the public key as published in the
// p= tag: the DER SubjectPublicKeyInfo for RSA, the raw 32 bytes for
// Ed25519 (RFC 8463 section 4.2).
func (k *Key) PublicKeyData() string {
	switch pub := k.signer.Public().(type) {
	case ed25519.PublicKey:
		return base64.StdEncoding.EncodeToString(pub)
	default:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			// Only reachable with a key NewKey would not have accepted.
			panic("dkim: marshalling public key: " + err.Error())
		}
		return base64.StdEncoding.EncodeToString(der)
	}
}

// MarshalPEM returns the private key as PKCS#8 PEM (block type
// "PRIVATE KEY"). The result is a secret: store it with Seal.
func (k *Key) MarshalPEM() ([]byte, error) {
	der, err := marshalPKCS8(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func marshalPKCS8(k *Key) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.signer)
	if err != nil {
		return nil, fmt.Errorf("dkim: marshalling private key: %w", err)
	}
	return der, nil
}

// ParsePEM reads a private key from PEM: PKCS#8 ("PRIVATE KEY", RSA or
// Ed25519) or PKCS#1 ("RSA PRIVATE KEY"). RSA keys shorter than MinRSABits
// are refused. Errors never quote the key material.
func ParsePEM(data []byte) (*Key, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("dkim: no PEM block found")
	}
	return parseDER(block.Type, block.Bytes)
}

func parseDER(blockType string, der []byte) (*Key, error) {
	var k any
	var err error
	switch blockType {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(der)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(der)
	default:
		return nil, fmt.Errorf("dkim: unsupported PEM block %q (want PRIVATE KEY)", blockType)
	}
	if err != nil {
		// crypto/x509's errors describe the structure, never the bytes.
		return nil, fmt.Errorf("dkim: parsing private key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("dkim: unsupported key type %T", k)
	}
	return NewKey(signer)
}
