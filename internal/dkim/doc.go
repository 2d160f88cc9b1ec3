// Package dkim holds the DKIM building blocks of a sending domain: key
// generation, storage of the private key (sealed with AES-256-GCM under a
// key derived from SENDONCE_SECRET_KEY, or plaintext PEM when no secret is
// configured), the DNS records to publish (the DKIM key record and SPF and
// DMARC suggestions), parsing of published key records, and signing of
// outgoing messages with github.com/emersion/go-msgauth.
//
// # Keys
//
// GenerateKey makes an RSA-2048 or Ed25519 key. MarshalPEM and ParsePEM
// convert a private key to and from PKCS#8 PEM ("PRIVATE KEY"); ParsePEM
// also reads PKCS#1 ("RSA PRIVATE KEY") so existing keys can be imported.
//
// # Storage format
//
// Seal(key, secret) returns the bytes to store. With an empty secret that
// is the plaintext PKCS#8 PEM, and the caller should tell the operator that
// the key is stored unencrypted (IsSealed reports false). Otherwise it is a
// PEM block of type "SENDONCE ENCRYPTED PRIVATE KEY" whose bytes are
//
//	version (1 byte, 0x01) | salt (16 bytes) | nonce (12 bytes) | ciphertext+tag
//
// The ciphertext is the PKCS#8 DER of the key encrypted with AES-256-GCM
// (16-byte tag appended), with version|salt as additional data. The AES key
// is HKDF-SHA256 (RFC 5869) of the secret, with the random salt and the
// info string "sendonce dkim private key v1", 32 bytes long (package seal,
// which seals webhook signing secrets too).
//
// HKDF is not a password hash: the secret must be high-entropy random, at
// least MinSecretLength bytes (for example the output of
// `openssl rand -base64 32`). Open reads both forms; a sealed key needs the
// secret it was sealed with.
//
// # Signing
//
// Sign adds a DKIM-Signature (rsa-sha256 or ed25519-sha256, relaxed/relaxed
// canonicalization) covering the headers of SignedHeaders that the message
// has, with From signed once more than it occurs (oversigned) so that a From
// added later breaks the signature.
package dkim
