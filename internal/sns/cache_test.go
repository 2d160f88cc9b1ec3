package sns

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// certServer answers every certificate URL with one certificate valid now,
// counting the requests by URL (and all of them under "").
func certServer(t *testing.T) (*http.Client, map[string]*atomic.Int32) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	body := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	counts := map[string]*atomic.Int32{"": {}}
	for i := range MaxCerts + 2 {
		counts[fmt.Sprintf("https://127.0.0.1:8443/c%d.pem", i)] = &atomic.Int32{}
	}
	client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		counts[""].Add(1)
		if n, ok := counts[r.URL.String()]; ok {
			n.Add(1)
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), Header: http.Header{}}, nil
	})}
	return client, counts
}

// A certificate URL with a query, a fragment or an unclean path is refused
// unfetched: each spelling of one certificate would otherwise be fetched
// and cached on its own, and 64 of them flushed the cache.
func TestCertificateURL_OneSpellingOnly(t *testing.T) {
	client, counts := certServer(t)
	v := New(client, []string{"127.0.0.1:8443"}, nil)
	ctx := t.Context()
	if _, err := v.cert(ctx, "https://127.0.0.1:8443/c0.pem"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://127.0.0.1:8443/c0.pem?x=1", "https://127.0.0.1:8443/c0.pem?", "https://127.0.0.1:8443/c0.pem#f",
		"https://127.0.0.1:8443//c0.pem", "https://127.0.0.1:8443/x/../c0.pem", "https://127.0.0.1:8443/c0.txt"} {
		if _, err := v.cert(ctx, u); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want refused", u, err)
		}
	}
	if n := counts[""].Load(); n != 1 {
		t.Errorf("%d fetches; want 1 (c0.pem, once)", n)
	}
}

// The cache is bounded and drops its oldest certificate when full, not
// every one: the newest MaxCerts stay cached.
func TestCertificateCache_DropsOldest(t *testing.T) {
	client, counts := certServer(t)
	v := New(client, []string{"127.0.0.1:8443"}, nil)
	ctx := t.Context()
	url := func(i int) string { return fmt.Sprintf("https://127.0.0.1:8443/c%d.pem", i) }
	for i := range MaxCerts + 1 {
		if _, err := v.cert(ctx, url(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= MaxCerts; i++ {
		if _, err := v.cert(ctx, url(i)); err != nil {
			t.Fatal(err)
		}
		if n := counts[url(i)].Load(); n != 1 {
			t.Fatalf("c%d.pem fetched %d times: a cached certificate was dropped", i, n)
		}
	}
	if _, err := v.cert(ctx, url(0)); err != nil || counts[url(0)].Load() != 2 {
		t.Errorf("the oldest (c0.pem) was not the one dropped: %d fetches, %v", counts[url(0)].Load(), err)
	}
	if len(v.certs) != MaxCerts || len(v.order) != MaxCerts {
		t.Errorf("cache holds %d (%d in order); want %d", len(v.certs), len(v.certs), MaxCerts)
	}
}
