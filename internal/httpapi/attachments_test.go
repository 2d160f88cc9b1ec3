package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// leaf is one non-multipart part of a delivered message.
type leaf struct {
	mediaType, filename, contentID, disposition string
	parents                                     []string // the multipart types around it, outermost first
	body                                        []byte
}

// leaves parses a delivered message with go-message and returns its
// non-multipart parts in order.
func leaves(t *testing.T, raw []byte) []leaf {
	t.Helper()
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse the delivered message: %v", err)
	}
	var out []leaf
	var walk func(e *gomessage.Entity, parents []string)
	walk = func(e *gomessage.Entity, parents []string) {
		mt, _, _ := e.Header.ContentType()
		if mr := e.MultipartReader(); mr != nil {
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatalf("read part: %v", err)
				}
				walk(p, append(append([]string{}, parents...), mt))
			}
		}
		b, err := io.ReadAll(e.Body) // go-message decodes base64 and quoted-printable
		if err != nil {
			t.Fatalf("read %s: %v", mt, err)
		}
		l := leaf{mediaType: mt, parents: parents, body: b, contentID: strings.Trim(e.Header.Get("Content-Id"), "<>")}
		if d, params, err := mime.ParseMediaType(e.Header.Get("Content-Disposition")); err == nil {
			l.disposition, l.filename = d, params["filename"] // RFC 2231 decoded
		}
		out = append(out, l)
	}
	walk(e, nil)
	return out
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttachments_DeliveredWithTheirBytesNamesAndTypes: the message the
// relay receives, parsed with go-message, carries each file's exact
// bytes, its filename (RFC 2231 for a non-ASCII one) and its type (given,
// or from the extension); the inline image sits beside the HTML that
// refers to it, in multipart/related. On every route that sends.
func TestAttachments_DeliveredWithTheirBytesNamesAndTypes(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		pdf, png, bin := randomBytes(t, 300<<10), randomBytes(t, 2000), randomBytes(t, 1)
		atts := []map[string]any{
			{"filename": "invoice.pdf", "content": base64.StdEncoding.EncodeToString(pdf)},
			{"filename": "logo.png", "content": base64.StdEncoding.EncodeToString(png), "content_id": "logo@x"},
			{"filename": "résumé ü.bin", "content": base64.StdEncoding.EncodeToString(bin), "content_type": "application/x-thing"},
		}
		html := `<p>Hi <img src="cid:logo@x"></p>`
		routes := []struct {
			name, path string
			body       map[string]any
		}{
			{"native", "/v1/send", map[string]any{"to": "ann@example.com", "subject": "files", "text": "plain", "html": html, "attachments": atts}},
			{"mailera", "/api/public/v1/mailboxes/default/send", map[string]any{"to": "ann@example.com", "subject": "files", "text": "plain", "html": html, "attachments": atts}},
			{"resend", "/emails", map[string]any{"from": "sender@example.com", "to": "ann@example.com", "subject": "files", "text": "plain", "html": html, "attachments": atts}},
		}
		for i, rt := range routes {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: rt.path, Key: env.AdminKey, IdemKey: fmt.Sprintf("att-%d", i), Body: rt.body})
			if r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", rt.name, r.Status, r.Body)
			}
			id, _ := r.JSON(t)["id"].(string)
			s := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)
			m := waitMessage(t, env.SMTP, s["message_id"].(string))
			ls := leaves(t, m.Data)
			if len(ls) != 5 {
				t.Fatalf("%s: %d leaf parts, want text, html, logo, pdf, bin: %+v", rt.name, len(ls), ls)
			}
			want := []struct {
				mt, filename, cid, disp string
				parents                 string
				body                    []byte
			}{
				{"text/plain", "", "", "", "multipart/mixed multipart/alternative", []byte("plain")},
				{"text/html", "", "", "", "multipart/mixed multipart/alternative multipart/related", []byte(html)},
				{"image/png", "logo.png", "logo@x", "inline", "multipart/mixed multipart/alternative multipart/related", png},
				{"application/pdf", "invoice.pdf", "", "attachment", "multipart/mixed", pdf},
				{"application/x-thing", "résumé ü.bin", "", "attachment", "multipart/mixed", bin},
			}
			for j, w := range want {
				got := ls[j]
				if got.mediaType != w.mt || got.filename != w.filename || got.contentID != w.cid || got.disposition != w.disp ||
					strings.Join(got.parents, " ") != w.parents || !bytes.Equal(got.body, w.body) {
					t.Errorf("%s part %d: %s %q cid %q %s in %v (%d bytes); want %s %q cid %q %s in %s (%d bytes, equal)",
						rt.name, j, got.mediaType, got.filename, got.contentID, got.disposition, got.parents, len(got.body),
						w.mt, w.filename, w.cid, w.disp, w.parents, len(w.body))
				}
			}
			if !bytes.Contains(m.Data, []byte("filename*=utf-8''r%C3%A9sum%C3%A9%20%C3%BC.bin")) {
				t.Errorf("%s: the non-ASCII filename is not written as RFC 2231", rt.name)
			}
		}
	})
}

// TestAttachments_BadInputIsA422NamingTheField: every bad attachment or
// schedule the contract lists is 422 validation_error with its param, and
// nothing is sent.
func TestAttachments_BadInputIsA422NamingTheField(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, NoWorkers: true})
		good := map[string]any{"filename": "a.txt", "content": "eA=="}
		with := func(bad map[string]any) []map[string]any { return []map[string]any{good, good, bad} }
		many := make([]map[string]any, 21)
		for i := range many {
			many[i] = good
		}
		now := time.Now().UTC()
		cases := []struct {
			name  string
			extra map[string]any
			param string
		}{
			{"bad base64", map[string]any{"attachments": with(map[string]any{"filename": "a.txt", "content": "not base64!"})}, "attachments[2].content"},
			{"CRLF in filename", map[string]any{"attachments": with(map[string]any{"filename": "a\r\nBcc: x@y.z", "content": "eA=="})}, "attachments[2].filename"},
			{"NUL in filename", map[string]any{"attachments": with(map[string]any{"filename": "a\x00.txt", "content": "eA=="})}, "attachments[2].filename"},
			{"slash in filename", map[string]any{"attachments": with(map[string]any{"filename": "../etc/passwd", "content": "eA=="})}, "attachments[2].filename"},
			{"backslash in filename", map[string]any{"attachments": with(map[string]any{"filename": `a\b.txt`, "content": "eA=="})}, "attachments[2].filename"},
			{"empty filename", map[string]any{"attachments": with(map[string]any{"filename": "", "content": "eA=="})}, "attachments[2].filename"},
			{"256-byte filename", map[string]any{"attachments": with(map[string]any{"filename": strings.Repeat("a", 256), "content": "eA=="})}, "attachments[2].filename"},
			{"content_id with a space", map[string]any{"attachments": with(map[string]any{"filename": "a.png", "content": "eA==", "content_id": "a b"})}, "attachments[2].content_id"},
			{"content_id with brackets", map[string]any{"attachments": with(map[string]any{"filename": "a.png", "content": "eA==", "content_id": "<a@b>"})}, "attachments[2].content_id"},
			{"bad content_type", map[string]any{"attachments": with(map[string]any{"filename": "a.png", "content": "eA==", "content_type": "image"})}, "attachments[2].content_type"},
			{"CRLF in content_type", map[string]any{"attachments": with(map[string]any{"filename": "a.png", "content": "eA==", "content_type": "image/png\r\nX: y"})}, "attachments[2].content_type"},
			{"21 attachments", map[string]any{"attachments": many}, "attachments"},
			{"path without --attachment-fetch", map[string]any{"attachments": with(map[string]any{"filename": "a.png", "path": "https://example.com/a.png"})}, "attachments[2].path"},
			{"scheduled_at in the past", map[string]any{"scheduled_at": now.Add(-time.Minute).Format(time.RFC3339)}, "scheduled_at"},
			{"scheduled_at 31 days ahead", map[string]any{"scheduled_at": now.Add(31 * 24 * time.Hour).Format(time.RFC3339)}, "scheduled_at"},
			{"scheduled_at without an offset", map[string]any{"scheduled_at": now.Add(time.Hour).Format("2006-01-02T15:04:05")}, "scheduled_at"},
			{"scheduled_at in words", map[string]any{"scheduled_at": "in 1 min"}, "scheduled_at"},
			// Over 1 MiB the decoder takes another path (decodeLarge): still strict.
			{"large body with a misspelt field", map[string]any{"suject": "x", "attachments": []map[string]any{{"filename": "big.bin", "content": strings.Repeat("QUJD", 400<<10)}}}, "suject"},
			{"large body with bad base64", map[string]any{"attachments": []map[string]any{{"filename": "big.bin", "content": strings.Repeat("QUJD", 400<<10) + "!"}}}, "attachments[0].content"},
			{"large body, number for a string", map[string]any{"subject": 5, "attachments": []map[string]any{{"filename": "big.bin", "content": strings.Repeat("QUJD", 400<<10)}}}, "subject"},
		}
		for i, c := range cases {
			body := sendoncetest.Mail("ann@example.com", "bad")
			for k, v := range c.extra {
				body[k] = v
			}
			r := env.Send(t, fmt.Sprintf("bad-%d", i), body)
			if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != core.CodeValidation {
				t.Errorf("%s: %d %s, want 422 validation_error", c.name, r.Status, r.Body)
				continue
			}
			if got, _ := r.JSON(t)["error"].(map[string]any)["param"].(string); got != c.param {
				t.Errorf("%s: param %q, want %q", c.name, got, c.param)
			}
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
			t.Errorf("%d sends stored by refused requests", n)
		}
	})
}

// TestAttachments_TenMiBEightTimesWithOneKey: eight concurrent requests
// with one key and a 10 MiB file make one send and one delivered message
// whose file is byte-identical; every answer is that send.
func TestAttachments_TenMiBEightTimesWithOneKey(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		// A long attempt lease: handing 14 MB to the relay under -race on a
		// loaded machine can outlast the default, and the send would be
		// rescued as unknown (what the lease is for, not this test's point).
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Lease: 3 * time.Minute})
		data := randomBytes(t, 10<<20)
		body := sendoncetest.Mail("ann@example.com", "big file")
		body["attachments"] = []map[string]any{{"filename": "big.bin", "content": base64.StdEncoding.EncodeToString(data)}}
		raw := []byte(mustMarshal(t, body))
		// Eight 14 MB bodies at once are slow under -race on a loaded
		// machine: a client that waits long, and retries what the server
		// says to retry (409 in use, 503 no room yet), as a client would.
		client := &http.Client{Timeout: 3 * time.Minute}
		post := func() (*sendoncetest.Response, error) {
			req, _ := http.NewRequest("POST", env.URL+"/v1/send", bytes.NewReader(raw))
			req.Header.Set("Authorization", "Bearer "+env.AdminKey)
			req.Header.Set("Idempotency-Key", "big-1")
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return &sendoncetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
		}
		var wg sync.WaitGroup
		answers := make([]*sendoncetest.Response, 8)
		errs := make([]error, 8)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Bounded: a key that stays in progress fails the test
				// with its last 409 instead of hanging it.
				for deadline := time.Now().Add(5 * time.Minute); ; {
					answers[i], errs[i] = post()
					if errs[i] != nil || (answers[i].Status != http.StatusConflict && answers[i].Status != http.StatusServiceUnavailable) ||
						time.Now().After(deadline) {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		var first []byte
		for i, r := range answers {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			if r.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
			if first == nil {
				first = r.Body
			} else if !bytes.Equal(r.Body, first) {
				t.Fatalf("request %d answered %s, another %s", i, r.Body, first)
			}
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 1 {
			t.Fatalf("%d sends, want 1", n)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM send_attachments`); n != 1 {
			t.Fatalf("%d stored files, want 1", n)
		}
		id := (&sendoncetest.Response{Body: first}).JSON(t)["id"].(string)
		s := env.WaitStatus(t, id, 2*time.Minute, core.StatusSent)
		m := waitMessage(t, env.SMTP, s["message_id"].(string))
		ls := leaves(t, m.Data)
		if len(ls) != 2 || !bytes.Equal(ls[1].body, data) {
			t.Fatalf("delivered %d parts; the file is not the 10 MiB sent", len(ls))
		}
		time.Sleep(200 * time.Millisecond)
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Fatalf("relay got %d messages, want 1", n)
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	return string(mustJSON(t, v))
}

// TestAttachments_AgentKeysMayNotAttach: an agent key's send with a file
// is 403 forbidden naming attachments, and nothing is stored.
func TestAttachments_AgentKeysMayNotAttach(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Agent: true})
	body := sendoncetest.Mail("ann@example.com", "file")
	body["attachments"] = []map[string]any{{"filename": "a.txt", "content": "eA=="}}
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: agent, IdemKey: "agent-att", Body: body})
	if r.Status != http.StatusForbidden || r.ErrorCode() != core.CodeForbidden {
		t.Fatalf("agent key with an attachment: %d %s, want 403 forbidden", r.Status, r.Body)
	}
	if got, _ := r.JSON(t)["error"].(map[string]any)["param"].(string); got != "attachments" {
		t.Fatalf("param %q, want attachments", got)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
		t.Fatalf("%d sends stored", n)
	}
}

// TestAttachments_PathIsFetchedOnceThroughTheOutboundPolicy: with
// --attachment-fetch, a path is fetched once at acceptance (a replay
// fetches nothing) and its bytes are delivered; under the default policy
// a loopback URL, or a redirect to one, is 422 naming the field.
func TestAttachments_PathIsFetchedOnceThroughTheOutboundPolicy(t *testing.T) {
	data := randomBytes(t, 5000)
	var fetches sync.Map
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := fetches.LoadOrStore(r.URL.Path, new(int))
		*n.(*int)++
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/file.bin", http.StatusFound)
			return
		}
		w.Write(data)
	}))
	defer files.Close()
	withPath := func(p string) map[string]any {
		body := sendoncetest.Mail("ann@example.com", "by path")
		body["attachments"] = []map[string]any{{"filename": "file.bin", "path": files.URL + p}}
		return body
	}

	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, AttachmentFetch: true}) // loopback allowed, as --outbound-allow 127.0.0.0/8
	r := env.Send(t, "path-1", withPath("/file.bin"))
	if r.Status != http.StatusOK {
		t.Fatalf("send by path: %d %s", r.Status, r.Body)
	}
	if again := env.Send(t, "path-1", withPath("/file.bin")); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want a replay", again.Status, again.Body)
	}
	if n, _ := fetches.Load("/file.bin"); *n.(*int) != 1 {
		t.Fatalf("fetched %d times, want once", *n.(*int))
	}
	s := env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusSent)
	if ls := leaves(t, waitMessage(t, env.SMTP, s["message_id"].(string)).Data); len(ls) != 2 || !bytes.Equal(ls[1].body, data) {
		t.Fatalf("the delivered file is not the fetched one (%d parts)", len(ls))
	}

	strict := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, AttachmentFetch: true, StrictOutbound: true})
	for i, p := range []string{"/file.bin", "/redirect"} {
		r := strict.Send(t, fmt.Sprint("strict-", i), withPath(p))
		if r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("loopback path %s under the default policy: %d %s, want 422", p, r.Status, r.Body)
		}
		if got, _ := r.JSON(t)["error"].(map[string]any)["param"].(string); got != "attachments[0].path" {
			t.Fatalf("param %q", got)
		}
	}
	for _, u := range []string{"ftp://example.com/a", "file:///etc/passwd"} {
		body := sendoncetest.Mail("ann@example.com", "bad scheme")
		body["attachments"] = []map[string]any{{"filename": "a", "path": u}}
		if r := strict.Send(t, "scheme-"+u, body); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("path %s: %d %s", u, r.Status, r.Body)
		}
	}
}

// TestAttachments_LargeRequestsBeyondTheBoundWaitThen503: while large
// requests hold --max-inflight-bytes, another waits, then is answered 503
// service_unavailable with Retry-After and stores nothing; once room is
// free it goes through. Small sends never wait.
func TestAttachments_LargeRequestsBeyondTheBoundWaitThen503(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, MaxInflightBytes: 2 << 20, InflightWait: 300 * time.Millisecond})
	body := sendoncetest.Mail("ann@example.com", "big")
	body["attachments"] = []map[string]any{{"filename": "a.bin", "content": base64.StdEncoding.EncodeToString(randomBytes(t, 1600<<10))}}
	raw := mustJSON(t, body)

	// A large request that holds back its body holds the room.
	release := holdLargeRequest(t, env)
	defer release() // also when the test fails first

	r := env.Send(t, "second", raw)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != core.CodeUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("second large request: %d %s (Retry-After %q), want 503 service_unavailable with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if small := env.Send(t, "small", sendoncetest.Mail("ann@example.com", "small")); small.Status != http.StatusOK {
		t.Fatalf("a small send waited: %d %s", small.Status, small.Body)
	}
	release() // the holder is answered 200
	if r := env.Send(t, "second", raw); r.Status != http.StatusOK {
		t.Fatalf("second large request once room was free: %d %s", r.Status, r.Body)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 3 {
		t.Fatalf("%d sends, want the holder, the small one and the second", n)
	}
}

// gatedBody is a request body that tells when its client first reads it
// (reading is closed) and gives its bytes only once open is called.
type gatedBody struct {
	r             io.Reader
	reading, gate chan struct{}
	asked, opened sync.Once
}

func (b *gatedBody) Read(p []byte) (int, error) {
	b.asked.Do(func() { close(b.reading) })
	<-b.gate
	return b.r.Read(p)
}

func (b *gatedBody) open() { b.opened.Do(func() { close(b.gate) }) }
