package app

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
)

// wantError checks err against a want of "code/param" ("" for no error).
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	var e *core.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want %s", err, want)
	}
	if got := e.Code + "/" + e.Param; got != want {
		t.Fatalf("error %s (%v), want %s", got, err, want)
	}
}

func TestSetRecipients_ParsesEachListAndRequiresTo(t *testing.T) {
	many := make([]string, MaxRecipients+1)
	for i := range many {
		many[i] = "a@example.com"
	}
	for _, c := range []struct {
		name   string
		r      SendRequest
		want   string
		wantTo []string
	}{
		{"to only", SendRequest{To: []string{"Ada <ada@example.com>"}}, "", []string{`"Ada" <ada@example.com>`}},
		{"no to", SendRequest{Cc: []string{"b@example.com"}}, "validation_error/to", nil},
		{"bad cc", SendRequest{To: []string{"a@example.com"}, Cc: []string{"not an address"}}, "validation_error/cc", nil},
		{"line break in bcc", SendRequest{To: []string{"a@example.com"}, Bcc: []string{"b@example.com\r\nBcc: c@example.com"}}, "validation_error/bcc", nil},
		{"too many reply_to", SendRequest{To: []string{"a@example.com"}, ReplyTo: many}, "validation_error/reply_to", nil},
		{"first bad list wins", SendRequest{Cc: []string{"bad"}}, "validation_error/to", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var send core.Send
			err := setRecipients(&send, &c.r)
			wantError(t, err, c.want)
			if err == nil && !reflect.DeepEqual(send.To, c.wantTo) {
				t.Fatalf("to = %q, want %q", send.To, c.wantTo)
			}
		})
	}
}

func TestFromAddress_MailboxRules(t *testing.T) {
	mb := &core.Mailbox{ID: "support", Name: "Support", Address: "support@example.com"}
	free := &core.APIKey{}
	bound := &core.APIKey{Mailboxes: []string{"support"}}
	for _, c := range []struct {
		name string
		key  *core.APIKey
		raw  string
		want string // the From, or the error's code/param
	}{
		{"empty: the mailbox's name and address", free, "", `"Support" <support@example.com>`},
		{"any address for a free key", free, "Other <other@example.com>", `"Other" <other@example.com>`},
		{"bound key, mailbox address under another name", bound, "Help Desk <Support@Example.com>", `"Help Desk" <Support@Example.com>`},
		{"bound key, empty", bound, "", `"Support" <support@example.com>`},
		{"bound key, another address", bound, "other@example.com", "forbidden/from"},
		{"unparsable", free, "not an address", "validation_error/from"},
		{"line break", free, "a@example.com\nBcc: b@example.com", "validation_error/from"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := fromAddress(c.key, mb, c.raw)
			if strings.Contains(c.want, "@") {
				wantError(t, err, "")
				if got != c.want {
					t.Fatalf("from = %q, want %q", got, c.want)
				}
				return
			}
			wantError(t, err, c.want)
		})
	}
}

func TestCheckContent_SourceAndShape(t *testing.T) {
	for _, c := range []struct {
		name string
		r    SendRequest
		want string
	}{
		{"own content", SendRequest{Subject: "Hi", Text: "x"}, ""},
		{"template alone", SendRequest{TemplateID: "welcome", Variables: map[string]any{"name": "Ada"}}, ""},
		{"template and subject", SendRequest{TemplateID: "welcome", Subject: "Hi"}, "validation_error/template_id"},
		{"template and html", SendRequest{TemplateID: "welcome", HTML: "<p>x</p>"}, "validation_error/template_id"},
		{"variables without template", SendRequest{Subject: "Hi", Text: "x", Variables: map[string]any{}}, "validation_error/variables"},
	} {
		t.Run("source/"+c.name, func(t *testing.T) { wantError(t, checkContentSource(&c.r), c.want) })
	}
	for _, c := range []struct {
		name, subject, text, html string
		want                      string
	}{
		{"text", "Hi", "x", "", ""},
		{"html", "Hi", "", "<p>x</p>", ""},
		{"blank subject", " \t", "x", "", "validation_error/subject"},
		{"subject with LF", "Hi\nBcc: x@example.com", "x", "", "validation_error/subject"},
		{"subject at the limit", strings.Repeat("s", MaxSubjectLen), "x", "", ""},
		{"subject too long", strings.Repeat("s", MaxSubjectLen+1), "x", "", "validation_error/subject"},
		{"no body", "Hi", "", "", "validation_error/text"},
	} {
		t.Run("shape/"+c.name, func(t *testing.T) { wantError(t, checkContent(c.subject, c.text, c.html), c.want) })
	}
}

func TestSendHeaders_SortedAndChecked(t *testing.T) {
	got, err := sendHeaders(map[string]string{"X-B": "2", "X-A": "1", "X-C": "3"})
	wantError(t, err, "")
	want := []core.Header{{Name: "X-A", Value: "1"}, {Name: "X-B", Value: "2"}, {Name: "X-C", Value: "3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("headers = %v, want %v (sorted by name)", got, want)
	}
	if got, err := sendHeaders(nil); err != nil || got != nil {
		t.Fatalf("no headers = %v, %v; want nil, nil", got, err)
	}
	many := map[string]string{}
	for i := range MaxHeaders + 1 {
		many["X-H"+strings.Repeat("h", i)] = "v"
	}
	_, err = sendHeaders(many)
	wantError(t, err, "validation_error/headers")
	_, err = sendHeaders(map[string]string{"X-Evil": "a\r\nBcc: b@example.com"})
	wantError(t, err, "validation_error/headers")
	_, err = sendHeaders(map[string]string{"From": "x@example.com"}) // reserved
	wantError(t, err, "validation_error/headers")
}

func TestCheckTags_Bounds(t *testing.T) {
	many := map[string]string{}
	for i := range MaxTags + 1 {
		many[strings.Repeat("t", i+1)] = "v"
	}
	for _, c := range []struct {
		name string
		tags map[string]string
		want string
	}{
		{"none", nil, ""},
		{"at the limits", map[string]string{strings.Repeat("k", MaxTagLen): strings.Repeat("v", MaxTagLen)}, ""},
		{"empty name", map[string]string{"": "v"}, "validation_error/tags"},
		{"long name", map[string]string{strings.Repeat("k", MaxTagLen+1): "v"}, "validation_error/tags"},
		{"long value", map[string]string{"k": strings.Repeat("v", MaxTagLen+1)}, "validation_error/tags"},
		{"too many", many, "validation_error/tags"},
	} {
		t.Run(c.name, func(t *testing.T) { wantError(t, checkTags(c.tags), c.want) })
	}
}
