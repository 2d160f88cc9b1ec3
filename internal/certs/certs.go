// Package certs holds the TLS certificates a listener serves, loaded from
// a certificate file and a key file, and reloads them in place: every new
// handshake asks the holder (tls.Config.GetCertificate), so a renewed
// certificate is served without restarting or dropping a connection.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
)

// Classes of load failure. A log line names the class and the file, never
// the parser's words, which could quote what it read.
const (
	// ClassUnreadable: the file could not be read (missing, permissions).
	ClassUnreadable = "unreadable"
	// ClassInvalidCertificate: the certificate file holds no certificate
	// that parses.
	ClassInvalidCertificate = "invalid_certificate"
	// ClassInvalidKey: the key file holds no key that parses, or one that
	// does not match the certificate.
	ClassInvalidKey = "invalid_key"
)

// LoadError is a pair that failed to load: which file, and the class of
// failure.
type LoadError struct {
	File  string
	Class string
	err   error
}

func (e *LoadError) Error() string { return e.File + ": " + e.Class }

// Unwrap gives the underlying error, for callers that check it with
// errors.Is (fs.ErrNotExist); it is not meant for logs.
func (e *LoadError) Unwrap() error { return e.err }

// Pair is one listener's certificate and key files and what was last
// loaded from them. Safe for concurrent use.
type Pair struct {
	// Name says whose pair this is in logs, e.g. the flag "--smtp-tls-cert".
	Name              string
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// Load reads the pair once; an error is a *LoadError.
func Load(name, certFile, keyFile string) (*Pair, error) {
	p := &Pair{Name: name, certFile: certFile, keyFile: keyFile}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload reads the files again. On success the new certificate serves
// every handshake from now on; on failure (a *LoadError) the one loaded
// before keeps serving.
func (p *Pair) Reload() error {
	cert, err := load(p.certFile, p.keyFile)
	if err != nil {
		return err
	}
	p.cur.Store(cert)
	return nil
}

// Certificate is the certificate served now.
func (p *Pair) Certificate() *tls.Certificate { return p.cur.Load() }

// GetCertificate is for tls.Config: it returns the current certificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.cur.Load(), nil
}

// ServerConfig is a server tls.Config that serves the current certificate.
func (p *Pair) ServerConfig() *tls.Config {
	return &tls.Config{GetCertificate: p.GetCertificate, MinVersion: tls.VersionTLS12}
}

func load(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &LoadError{File: certFile, Class: ClassUnreadable, err: err}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &LoadError{File: keyFile, Class: ClassUnreadable, err: err}
	}
	// The certificate is checked on its own first, so that a failure of
	// the pair below is the key's.
	if err := certificatesParse(certPEM); err != nil {
		return nil, &LoadError{File: certFile, Class: ClassInvalidCertificate, err: err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &LoadError{File: keyFile, Class: ClassInvalidKey, err: err}
	}
	return &cert, nil
}

// certificatesParse checks that data holds at least one PEM certificate
// and that every one parses.
func certificatesParse(data []byte) error {
	n := 0
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate")
	}
	return nil
}

// Set is every pair of a process, reloaded together (on SIGHUP).
type Set []*Pair

// Reload reloads every pair and logs each outcome: info with the new
// certificate's expiry, or warn with the file and class of the failure
// (the old certificate stays). It returns how many failed.
func (s Set) Reload(logger *slog.Logger) (failed int) {
	for _, p := range s {
		if err := p.Reload(); err != nil {
			failed++
			attrs := []any{slog.String("listener", p.Name)}
			var le *LoadError
			if errors.As(err, &le) {
				attrs = append(attrs, slog.String("file", le.File), slog.String("class", le.Class))
			}
			logger.Warn("certificate reload failed, keeping the loaded one", attrs...)
			continue
		}
		attrs := []any{slog.String("listener", p.Name), slog.String("file", p.certFile)}
		if leaf := p.Certificate().Leaf; leaf != nil {
			attrs = append(attrs, slog.Time("not_after", leaf.NotAfter))
		}
		logger.Info("certificate reloaded", attrs...)
	}
	return failed
}
