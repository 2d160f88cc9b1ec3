package dashboard

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
)

// The received-mail pages ("Mail"): a mailbox's threads and a thread's
// messages, received and sent. Not the dev inbox (inbox.go), which is the
// capture transport's copy of mail sent. Every read goes through the app's
// receiving methods with the signed-in key, which apply its mailbox limits
// as they do for the API: a thread of a mailbox the key may not use is not
// found.

// mailFolders are the folder tabs, in order.
var mailFolders = []string{core.FolderInbox, core.FolderArchive, core.FolderTrash}

type mailListData struct {
	Inboxes []app.Inbox
	Mailbox string // the chosen mailbox's id; "" for all the key may see
	Folder  string
	Folders []string
	Threads []*core.Thread
	Unread  int // unread messages of the threads on this page
	Next    string
	// Warning: mail may never arrive here (app.Service.ReceivingWarning).
	Warning string
}

// mailList is a mailbox's threads in one folder, newest activity first.
func (d *Dashboard) mailList(q *req) error {
	v := q.r.URL.Query()
	folder := v.Get("folder")
	if folder == "" {
		folder = core.FolderInbox
	}
	if !slices.Contains(mailFolders, folder) {
		return core.Errorf(core.CodeValidation, "folder", "folder must be inbox, archive or trash")
	}
	inboxes, err := d.svc.ListInboxes(q.ctx(), q.key)
	if err != nil {
		return err
	}
	data := mailListData{Inboxes: inboxes, Mailbox: v.Get("mailbox"), Folder: folder, Folders: mailFolders, Warning: d.svc.ReceivingWarning()}
	f := core.ThreadFilter{Folders: []string{folder}, Limit: pageSize, After: v.Get("after")}
	if data.Mailbox != "" {
		// A mailbox the key may not use is not found, not an empty list:
		// the same answer as for one that does not exist.
		if !slices.ContainsFunc(inboxes, func(in app.Inbox) bool { return in.Mailbox.ID == data.Mailbox }) {
			return core.ErrNotFound
		}
		f.MailboxIDs = []string{data.Mailbox}
	}
	ts, more, err := d.svc.ListThreads(q.ctx(), q.key, f)
	if err != nil {
		return err
	}
	data.Threads = ts
	for _, t := range ts {
		data.Unread += t.Unread
	}
	if more {
		data.Next = ts[len(ts)-1].ID
	}
	return d.render(q, 0, "mail", "Mail", data)
}

// mailItem is one message of a thread as the page shows it: a received
// message or a send, never both.
type mailItem struct {
	Received *core.ReceivedMessage
	Sent     *core.Send
	// ReplyNonce names this reply form's one submission (mailReply).
	ReplyNonce string
}

type threadData struct {
	Thread   *core.Thread
	Items    []mailItem
	Remote   bool
	CanReply bool // the key may send: the reply forms and the changes are shown
	// Next is the cursor of the thread's next page ("" on the last).
	Next string
}

// threadPageSize is how many messages the thread page shows at once, and
// maxShownBody the most of one body it shows inline: a thread of large
// messages from strangers costs the page a bounded amount (the whole
// message stays in its raw source and HTML frame).
const (
	threadPageSize = 20
	maxShownBody   = 256 << 10
)

// capBody is b cut at maxShownBody bytes (on a character boundary), a copy
// so that the whole body is not kept alive by the cut.
func capBody(b string) string {
	if len(b) <= maxShownBody {
		return b
	}
	n := maxShownBody
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strings.Clone(b[:n]) + "\n[… cut here: the rest is in the raw source]"
}

// mailThread shows a thread's messages oldest first, received and sent
// interleaved as the API's thread read does.
func (d *Dashboard) mailThread(q *req) error {
	ctx := q.ctx()
	t, err := d.svc.Thread(ctx, q.key, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	// Opened by a person is read, as in every mail client; only with the
	// scope that may change a thread (PATCH /v1/threads/{id}), so a read
	// key looks without changing anything.
	if t.Unread > 0 && q.key.Has(core.ScopeSend) && q.r.URL.Query().Get("after") == "" {
		if t, err = d.svc.ChangeThread(ctx, q.key, t.ID, app.ThreadChange{Read: ptr(true)}); err != nil {
			return err
		}
	}
	p, err := d.svc.ThreadPage(ctx, q.key, t.ID, q.r.URL.Query().Get("after"), threadPageSize)
	if err != nil {
		return err
	}
	data := threadData{Thread: t, Remote: q.r.URL.Query().Get("remote") == "1", CanReply: q.key.Has(core.ScopeSend), Next: p.Next}
	for _, it := range p.Items {
		if it.Kind == core.ThreadSent {
			s, err := d.reads.Send(ctx, q.key.Tenant, it.ID)
			if err != nil {
				continue // purged after its retention, as the API skips it
			}
			s.Text, s.HTML = capBody(s.Text), capBody(s.HTML)
			data.Items = append(data.Items, mailItem{Sent: s})
			continue
		}
		// One message's bodies at a time, kept only up to the cap.
		m, err := d.svc.ReceivedMessage(ctx, q.key, it.ID)
		if err != nil {
			continue
		}
		m.Text, m.HTML, m.Headers = capBody(m.Text), capBody(m.HTML), nil
		data.Items = append(data.Items, mailItem{Received: m, ReplyNonce: token()})
	}
	return d.render(q, 0, "thread", t.Subject, data)
}

// threadChanges are the changes the thread page's buttons make.
var threadChanges = map[string]app.ThreadChange{
	"read":    {Read: ptr(true)},
	"unread":  {Read: ptr(false)},
	"inbox":   {Folder: ptr(core.FolderInbox)},
	"archive": {Folder: ptr(core.FolderArchive)},
	"trash":   {Folder: ptr(core.FolderTrash)},
}

func ptr[T any](v T) *T { return &v }

// threadAction is one button of the thread page.
type threadAction struct{ Do, Label string }

// threadActions are the changes that make sense for t now: read or unread
// by its unread count, and a move to each folder it is not in.
func threadActions(t *core.Thread) []threadAction {
	out := []threadAction{{"read", "Mark read"}}
	if t.Unread == 0 {
		out[0] = threadAction{"unread", "Mark unread"}
	}
	for _, a := range []threadAction{{"inbox", "Move to inbox"}, {"archive", "Archive"}, {"trash", "Move to trash"}} {
		if a.Do != t.Folder {
			out = append(out, a)
		}
	}
	return out
}

// mailChange marks a thread read or unread or moves it, as PATCH
// /v1/threads/{id} does (and with its scope, send).
func (d *Dashboard) mailChange(q *req) error {
	c, ok := threadChanges[q.r.PostFormValue("do")]
	if !ok {
		return core.Errorf(core.CodeValidation, "do", "do must be read, unread, inbox, archive or trash")
	}
	t, err := d.svc.ChangeThread(q.ctx(), q.key, q.r.PathValue("id"), c)
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/mail/"+t.ID, http.StatusSeeOther)
	return nil
}

// receivedHTML serves a received message's HTML for the sandboxed frame:
// the send view's mechanism (writeMailHTML), never inlined in a page.
func (d *Dashboard) receivedHTML(q *req) error {
	m, err := d.svc.ReceivedMessage(q.ctx(), q.key, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeMailHTML(q, m.HTML)
}

type rawData struct {
	Msg *core.ReceivedMessage
	Raw string
}

// receivedRaw shows the message's source as escaped text in a page, or
// with ?download=1 as an .eml file.
func (d *Dashboard) receivedRaw(q *req) error {
	m, err := d.svc.ReceivedMessage(q.ctx(), q.key, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	raw, err := d.svc.ReceivedRaw(q.ctx(), q.key, m.ID)
	if err != nil {
		return err
	}
	if q.r.URL.Query().Get("download") == "1" {
		h := q.w.Header()
		h.Set("Content-Type", "message/rfc822")
		h.Set("Content-Disposition", `attachment; filename="`+m.ID+`.eml"`)
		_, err = q.w.Write(raw)
		return err
	}
	return d.render(q, 0, "rawsource", "Source of "+m.ID, rawData{Msg: m, Raw: string(raw)})
}

// receivedAttachment downloads one attachment. It is always a download of
// opaque bytes: the sender chose its name and type, and a type a browser
// would render (text/html) on the dashboard's origin would run as the
// dashboard.
func (d *Dashboard) receivedAttachment(q *req) error {
	att, b, err := d.svc.ReceivedAttachment(q.ctx(), q.key, q.r.PathValue("id"), q.r.PathValue("att"))
	if err != nil {
		return err
	}
	h := q.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Disposition", message.AttachmentDisposition(att.Filename))
	_, err = q.w.Write(b)
	return err
}
