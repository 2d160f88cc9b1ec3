package kit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The send body as the native route spells it. Its address lists and
// attachments are shared with the Resend and Mailera bodies.

// AddrList accepts a single address or an array of them.
type AddrList []string

// CheckRecipientCounts refuses a field of more than app.MaxRecipients
// addresses before anything else reads the request (the compatibility
// routes resolve templates first, which a huge list should not reach).
func CheckRecipientCounts(to, cc, bcc, replyTo AddrList) error {
	for _, f := range []struct {
		name string
		list AddrList
	}{{"to", to}, {"cc", cc}, {"bcc", bcc}, {"reply_to", replyTo}} {
		if len(f.list) > app.MaxRecipients {
			return core.Errorf(core.CodeValidation, f.name, "at most %d addresses", app.MaxRecipients)
		}
	}
	return nil
}

func (a *AddrList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*a = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = AddrList{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		// A type error, so that the decoder names the field it happened in
		// and decodeStrict reports it as the param.
		return &json.UnmarshalTypeError{Value: jsonValueKind(b), Type: addrListType}
	}
	*a = l
	return nil
}

var addrListType = reflect.TypeFor[AddrList]()

type SendRequest struct {
	To         AddrList          `json:"to"`
	Cc         AddrList          `json:"cc"`
	Bcc        AddrList          `json:"bcc"`
	ReplyTo    AddrList          `json:"reply_to"`
	From       string            `json:"from"`
	MailboxID  string            `json:"mailbox_id"`
	Subject    string            `json:"subject"`
	Text       string            `json:"text"`
	HTML       string            `json:"html"`
	TemplateID string            `json:"template_id"`
	Variables  map[string]any    `json:"variables"`
	Headers    map[string]string `json:"headers"`
	Tags       map[string]string `json:"tags"`
	// Attachments and ScheduledAt: docs/api.md, "Attachments" and "Scheduled sends".
	Attachments []AttachmentJSON `json:"attachments"`
	ScheduledAt string           `json:"scheduled_at"`
	// Stream: docs/api.md, "Streams" ("" for the key's default).
	Stream string `json:"stream"`
	// Unsubscribe: docs/deliverability.md, "One-click unsubscribe".
	Unsubscribe bool `json:"unsubscribe"`
}

// ToApp is the request as the application takes it (the one mapping of
// the native body; app checks every field, the recipient counts
// included). mailboxID is the body's, or the path's on the Mailera route.
func (req *SendRequest) ToApp(mailboxID string) *app.SendRequest {
	return &app.SendRequest{
		To: req.To, Cc: req.Cc, Bcc: req.Bcc, ReplyTo: req.ReplyTo, From: req.From, MailboxID: mailboxID,
		Subject: req.Subject, Text: req.Text, HTML: req.HTML, TemplateID: req.TemplateID, Variables: req.Variables,
		Headers: req.Headers, Tags: req.Tags, Attachments: AppAttachments(req.Attachments), ScheduledAt: req.ScheduledAt,
		Stream: req.Stream, Unsubscribe: req.Unsubscribe,
	}
}

// AttachmentJSON is one attachment as every send route spells it.
type AttachmentJSON struct {
	Filename    string        `json:"filename"`
	Content     base64Content `json:"content"`
	ContentType string        `json:"content_type"`
	ContentID   string        `json:"content_id"`
	Path        string        `json:"path"`
}

// base64Content is an attachment's content, decoded from base64 straight
// out of the request's bytes: a 10 MiB file is not first copied into a
// 13.4 MiB string. Bad base64 is kept as bad (app reports it with the
// field's name).
type base64Content struct {
	data []byte
	bad  bool
	set  bool
}

func (c *base64Content) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*c = base64Content{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' {
		return &json.UnmarshalTypeError{Value: jsonValueKind(b), Type: stringType}
	}
	raw := b[1 : len(b)-1]
	if bytes.IndexByte(raw, '\\') >= 0 { // escapes (\/, \n): decode the string first
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		raw = []byte(s)
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Decode(data, raw)
	*c = base64Content{data: data[:n], bad: err != nil, set: true}
	return nil
}

var stringType = reflect.TypeFor[string]()

func AppAttachments(in []AttachmentJSON) []app.AttachmentRequest {
	if len(in) == 0 {
		return nil
	}
	out := make([]app.AttachmentRequest, len(in))
	for i, a := range in {
		out[i] = app.AttachmentRequest{Filename: a.Filename, Data: a.Content.data, HasContent: a.Content.set,
			BadContent: a.Content.bad, ContentType: a.ContentType, ContentID: a.ContentID, Path: a.Path}
	}
	return out
}

// PatchSendField copies the field a draft's edit body calls name from in
// to r: the native PATCH and Resend's draft update name their fields
// alike (Resend's are a few of the native ones), so both edit a draft
// through it. A name of no field of the send changes nothing.
func PatchSendField(name string, in, r *app.SendRequest) {
	switch name {
	case "to":
		r.To = in.To
	case "cc":
		r.Cc = in.Cc
	case "bcc":
		r.Bcc = in.Bcc
	case "reply_to":
		r.ReplyTo = in.ReplyTo
	case "from":
		r.From = in.From
	case "mailbox_id":
		r.MailboxID = in.MailboxID
	case "subject":
		r.Subject = in.Subject
	case "text":
		r.Text = in.Text
	case "html":
		r.HTML = in.HTML
	case "template_id":
		r.TemplateID = in.TemplateID
	case "variables":
		r.Variables = in.Variables
	case "headers":
		r.Headers = in.Headers
	case "tags":
		r.Tags = in.Tags
	case "attachments":
		r.Attachments = in.Attachments
	case "scheduled_at":
		r.ScheduledAt = in.ScheduledAt
	case "stream":
		r.Stream = in.Stream
	case "unsubscribe":
		r.Unsubscribe = in.Unsubscribe
	}
}
