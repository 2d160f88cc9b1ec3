package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
)

// TestProvider_ResendChainHoldsOneEmail: sendonce A sends through
// resend:// to sendonce B — a second process whose Resend-compatible
// POST /emails honours Idempotency-Key (held to the official Node SDK by
// internal/httpapi's tests) — and a proxy drops B's first answer after B
// took the email. A asks again with the same key: B holds exactly one
// email, with A's Message-ID, and A's send is sent with B's email id.
func TestProvider_ResendChainHoldsOneEmail(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	dbB := "sqlite:" + filepath.Join(dir, "b.db")
	keyB := createKey(t, dbB, "a-relays-here", "send,read")
	b := startServe(t, "--db", dbB) // capture transport: B keeps what it takes
	var posts atomic.Int32
	px := faultproxy.Start(t, faultproxy.Options{Upstream: b.url, Plan: func(r faultproxy.Request) faultproxy.Fault {
		if r.Method == "POST" && r.Path == "/emails" && posts.Add(1) == 1 {
			return faultproxy.Drop // B took it; A never hears so
		}
		return faultproxy.Pass
	}})

	dbA := "sqlite:" + filepath.Join(dir, "a.db")
	keyA := createKey(t, dbA, "app", "send,read")
	a := startServe(t, "--db", dbA, "--transport", "resend://"+keyB+"@"+strings.TrimPrefix(px.URL, "http://")+"?tls=none",
		"--retry-base", "50ms", "--poll-interval", "20ms", "--outbound-allow", "127.0.0.0/8")
	apiA := api{t: t, url: a.url, secret: keyA, hc: &http.Client{Timeout: 10 * time.Second}}
	v := apiA.send("chain-1")
	final := apiA.waitDecided([]string{v.ID}, 30*time.Second)[v.ID]
	if final.Status != "sent" {
		t.Fatalf("A's send is %s, want sent\n%s", final.Status, a.logText())
	}

	req, _ := http.NewRequest("GET", b.url+"/emails?limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+keyB)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("B's list: %v %s", err, body)
	}
	if len(list.Data) != 1 || posts.Load() < 2 {
		t.Fatalf("B holds %d emails after %d POSTs; want 1 after at least 2\n%s", len(list.Data), posts.Load(), body)
	}
	bSend := api{t: t, url: b.url, secret: keyB, hc: apiA.hc}.get(list.Data[0].ID)
	if bSend.MessageID != final.MessageID {
		t.Errorf("B's email has Message-ID %q, A's send %q: the relayed message should keep its own", bSend.MessageID, final.MessageID)
	}
}
