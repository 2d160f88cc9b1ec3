package delivery_test

import (
	"bytes"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const unsubPublicURL = "https://mail.example.test"

var unsubLink = regexp.MustCompile(`<` + regexp.QuoteMeta(unsubPublicURL) + `(/u/[^>]+)>`)

// unsubscribeHeaders returns the List-Unsubscribe and
// List-Unsubscribe-Post values of a delivered message.
func unsubscribeHeaders(t *testing.T, data []byte) (list, post string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("read delivered message: %v", err)
	}
	return m.Header.Get("List-Unsubscribe"), m.Header.Get("List-Unsubscribe-Post")
}

// deliveredTo returns the data of the one message the relay got for rcpt.
func deliveredTo(t *testing.T, env *sendoncetest.Env, rcpt string) []byte {
	t.Helper()
	var found [][]byte
	for _, m := range env.SMTP.Messages() {
		if slices.Contains(m.To, rcpt) {
			found = append(found, m.Data)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the relay got %d messages for %s, want 1", len(found), rcpt)
	}
	return found[0]
}

// unsubscribePath is the /u/{token} path of a delivered message's link.
func unsubscribePath(t *testing.T, data []byte) string {
	t.Helper()
	list, _ := unsubscribeHeaders(t, data)
	m := unsubLink.FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("List-Unsubscribe %q has no link under %s", list, unsubPublicURL)
	}
	return m[1]
}

// TestUnsubscribe_BulkMessageCarriesSignedOneClickHeaders: a bulk send's
// message, and a transactional send's that asked for it, reach the relay
// with List-Unsubscribe (a link under --public-url) and
// List-Unsubscribe-Post, both in the DKIM signature's h=, which verifies
// against the published key; a plain transactional send has neither, and
// a bulk send to several recipients is refused.
func TestUnsubscribe_BulkMessageCarriesSignedOneClickHeaders(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, SecretKey: testSecret,
			PublicURL: unsubPublicURL})
		dns := dnstest.Start(t, env.AddDomain(t, map[string]string{"domain": "news.test"}))
		for _, id := range []string{
			send(t, env, map[string]any{"from": "news@news.test", "to": "bulk@example.com", "subject": "News", "text": "x", "stream": "bulk"}),
			send(t, env, map[string]any{"from": "news@news.test", "to": "asked@example.com", "subject": "Hi", "text": "x", "unsubscribe": true}),
			send(t, env, map[string]any{"from": "news@news.test", "to": "plain@example.com", "subject": "Receipt", "text": "x"}),
		} {
			env.WaitStatus(t, id, waitLong, core.StatusSent)
		}
		for _, rcpt := range []string{"bulk@example.com", "asked@example.com"} {
			data := deliveredTo(t, env, rcpt)
			list, post := unsubscribeHeaders(t, data)
			if !unsubLink.MatchString(list) || post != "List-Unsubscribe=One-Click" {
				t.Errorf("%s: List-Unsubscribe %q, List-Unsubscribe-Post %q; want the link and One-Click", rcpt, list, post)
			}
			if strings.Contains(strings.ToLower(list), rcpt) {
				t.Errorf("%s: the link shows the address: %q", rcpt, list)
			}
			vs := verifyDKIM(t, dns, data)
			if len(vs) != 1 || vs[0].Err != nil {
				t.Fatalf("%s: verifications = %+v, want one passing signature", rcpt, vs)
			}
			for _, h := range []string{"List-Unsubscribe", "List-Unsubscribe-Post"} {
				if !slices.ContainsFunc(vs[0].HeaderKeys, func(k string) bool { return strings.EqualFold(k, h) }) {
					t.Errorf("%s: the signature does not cover %s: h=%v", rcpt, h, vs[0].HeaderKeys)
				}
			}
		}
		if list, post := unsubscribeHeaders(t, deliveredTo(t, env, "plain@example.com")); list != "" || post != "" {
			t.Errorf("a plain transactional message carries List-Unsubscribe %q, List-Unsubscribe-Post %q", list, post)
		}
		r := env.Send(t, "own", map[string]any{"to": "a@example.com", "subject": "News", "text": "x", "stream": "bulk",
			"headers": map[string]string{"List-Unsubscribe": "<https://elsewhere.example/u>"}})
		if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != core.CodeValidation {
			t.Errorf("a bulk send with its own List-Unsubscribe: %d %s, want 422 validation_error", r.Status, r.Body)
		}
	})
}

// unsubscribeEvents counts the send's email.unsubscribed entries.
func unsubscribeEvents(t *testing.T, env *sendoncetest.Env, id string) int {
	t.Helper()
	n := 0
	events, _ := getSend(t, env, id)["events"].([]any)
	for _, e := range events {
		if e.(map[string]any)["type"] == core.EventUnsubscribed {
			n++
		}
	}
	return n
}

// suppressionsOf lists the tenant's suppression entries for an address.
func suppressionsOf(t *testing.T, env *sendoncetest.Env, addr string) []any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions?email=" + addr, Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/suppressions: %d %s", r.Status, r.Body)
	}
	data, _ := r.JSON(t)["data"].([]any)
	return data
}

// TestUnsubscribe_OneClickPostSuppressesBulkMailOnce: GET /u/{token}
// shows a page and changes nothing; an altered token is 404; the
// one-click POST is 200 and suppresses the recipient for bulk mail
// (origin unsubscribe) with one email.unsubscribed, and a repeat is 200
// changing nothing; afterwards a bulk send to the address ends suppressed
// while a transactional one still goes.
func TestUnsubscribe_OneClickPostSuppressesBulkMailOnce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, PublicURL: unsubPublicURL})
		const addr = "reader@example.com"
		id := send(t, env, map[string]any{"to": "Reader <" + addr + ">", "subject": "News", "text": "x", "stream": "bulk"})
		env.WaitStatus(t, id, waitLong, core.StatusSent)
		path := unsubscribePath(t, deliveredTo(t, env, addr))
		oneClick := func(p string) *sendoncetest.Response {
			return env.Do(t, sendoncetest.Request{Method: "POST", Path: p, Body: "List-Unsubscribe=One-Click",
				Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
		}

		page := env.Do(t, sendoncetest.Request{Method: "GET", Path: path})
		if page.Status != http.StatusOK || !bytes.Contains(page.Body, []byte(`name="List-Unsubscribe" value="One-Click"`)) {
			t.Fatalf("GET %s: %d %s, want 200 and a one-click form", path, page.Status, page.Body)
		}
		if n := len(suppressionsOf(t, env, addr)); n != 0 || unsubscribeEvents(t, env, id) != 0 {
			t.Fatalf("after GET: %d suppressions, %d unsubscribed events; want none", n, unsubscribeEvents(t, env, id))
		}
		altered := path[:len(path)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(path, "a")]
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: altered}); r.Status != http.StatusNotFound {
			t.Errorf("GET an altered token: %d, want 404", r.Status)
		}
		if r := oneClick(altered); r.Status != http.StatusNotFound {
			t.Errorf("POST an altered token: %d, want 404", r.Status)
		}

		for i := range 2 {
			if r := oneClick(path); r.Status != http.StatusOK {
				t.Fatalf("POST %s (%d): %d %s", path, i+1, r.Status, r.Body)
			}
		}
		sups := suppressionsOf(t, env, addr)
		if len(sups) != 1 || sups[0].(map[string]any)["origin"] != core.SuppressionUnsubscribe || sups[0].(map[string]any)["send_id"] != id {
			t.Fatalf("suppressions of %s = %v, want one of origin unsubscribe from %s", addr, sups, id)
		}
		if n := unsubscribeEvents(t, env, id); n != 1 {
			t.Fatalf("%d email.unsubscribed events after two POSTs, want 1", n)
		}

		later := send(t, env, map[string]any{"to": addr, "subject": "More news", "text": "x", "stream": "bulk"})
		receipt := send(t, env, map[string]any{"to": addr, "subject": "Your receipt", "text": "x"})
		env.WaitStatus(t, later, waitLong, core.StatusSuppressed)
		env.WaitStatus(t, receipt, waitLong, core.StatusSent)
	})
}
