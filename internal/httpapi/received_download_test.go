package httpapi_test

import (
	"mime"
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A received attachment downloads under its own file name (RFC 2231 for
// a name that is not ASCII), as a download: the API route and the signed
// link Resend's SDK follows both say it.
func TestReceivedAttachment_DownloadsUnderItsName(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	raw := "From: a@stranger.test\r\nTo: desk@files.test\r\nSubject: Files\r\nMessage-ID: <f1@stranger.test>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n" +
		"--B\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename*=utf-8''Rechnung%20M%C3%A4rz.pdf\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--B--\r\n"
	rcv, _ := receiveAtDesk(t, env, raw)
	msg := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/received/" + rcv.ID, Key: env.AdminKey}).JSON(t)
	att := msg["attachments"].([]any)[0].(map[string]any)
	check := func(what string, r *sendoncetest.Response) {
		t.Helper()
		disp, params, err := mime.ParseMediaType(r.Header.Get("Content-Disposition"))
		if r.Status != http.StatusOK || err != nil || disp != "attachment" || params["filename"] != "Rechnung März.pdf" {
			t.Errorf("%s: %d, Content-Disposition %q, want attachment named Rechnung März.pdf", what, r.Status, r.Header.Get("Content-Disposition"))
		}
	}
	check("GET /v1/received/{id}/attachments/{att}", env.Do(t, sendoncetest.Request{Method: http.MethodGet,
		Path: "/v1/received/" + rcv.ID + "/attachments/" + att["id"].(string), Key: env.AdminKey}))
	resend := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/emails/receiving/" + rcv.ID + "/attachments/" + att["id"].(string), Key: env.AdminKey}).JSON(t)
	u, _ := resend["download_url"].(string)
	if u == "" {
		t.Fatalf("Resend's attachment object has no download_url: %v", resend)
	}
	check("the signed download link", env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: u[len(env.URL):]}))
}

// receiveAtDesk makes the inbox desk@files.test of the default tenant and
// receives raw there; it returns the message and the inbox.
func receiveAtDesk(t *testing.T, env *sendoncetest.Env, raw string) (app.Received, string) {
	t.Helper()
	m := env.NewInbox(t, "default", "desk@files.test", "Desk")
	return env.Receive(t, m, raw), m.ID
}

// A thread says who its latest received message went to (to and cc), on
// the native and Resend's reads, not an empty list.
func TestThread_SaysItsRecipients(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	rcv, inbox := receiveAtDesk(t, env, "From: a@stranger.test\r\nTo: desk@files.test\r\nCc: Boss <boss@files.test>\r\nSubject: Hi\r\n"+
		"Message-ID: <t1@stranger.test>\r\n\r\nHello\r\n")
	for _, path := range []string{"/v1/threads/" + rcv.ThreadID, "/inboxes/" + inbox + "/threads/" + rcv.ThreadID} {
		th := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: path, Key: env.AdminKey}).JSON(t)
		to, _ := th["to"].([]any)
		cc, _ := th["cc"].([]any)
		if len(to) != 1 || to[0] != "desk@files.test" || len(cc) != 1 {
			t.Errorf("GET %s: to %v, cc %v; want the latest message's recipients", path, th["to"], th["cc"])
		}
	}
}
