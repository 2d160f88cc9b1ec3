package dashboard

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	_ "github.com/emersion/go-message/charset" // decode the charsets mail uses, not only UTF-8
	"github.com/emersion/go-message/mail"

	"github.com/sendonce/sendonce/internal/core"
)

// inboxLimit is how many captured messages the dev inbox lists.
const inboxLimit = 200

// maxPart bounds the bytes read of one part of a captured message.
const maxPart = 4 << 20

func (d *Dashboard) inbox(q *req) error {
	list, err := d.reads.ListInbox(q.ctx(), q.key.Tenant, inboxLimit)
	if err != nil {
		return err
	}
	return d.render(q, 0, "inbox", "Dev inbox", list)
}

func (d *Dashboard) inboxLive(q *req) error {
	return d.live(q, func(ctx context.Context) ([]liveRow, error) {
		list, err := d.reads.ListInbox(ctx, q.key.Tenant, inboxLimit)
		if err != nil {
			return nil, err
		}
		return renderRows(d, list, "inboxrow", func(m *core.InboxMessage) string { return m.ID })
	})
}

type inboxData struct {
	Msg              *core.InboxMessage
	Text, HTML, Head string
	Remote           bool
}

// parsed reads a captured message's header and its text and HTML bodies.
func parsed(m *core.InboxMessage) inboxData {
	data := inboxData{Msg: m}
	head, _, _ := bytes.Cut(m.Raw, []byte("\r\n\r\n"))
	data.Head = string(head)
	mr, err := mail.CreateReader(bytes.NewReader(m.Raw))
	if err != nil {
		data.Text = "(this message could not be parsed; see its raw source)"
		return data
	}
	for {
		p, err := mr.NextPart()
		if err != nil {
			break // io.EOF, or a malformed part: show what was read
		}
		h, ok := p.Header.(*mail.InlineHeader)
		if !ok {
			continue
		}
		ct, _, _ := h.ContentType()
		b, _ := io.ReadAll(io.LimitReader(p.Body, maxPart))
		switch {
		case ct == "text/html" && data.HTML == "":
			data.HTML = string(b)
		case strings.HasPrefix(ct, "text/plain") && data.Text == "":
			data.Text = string(b)
		}
	}
	return data
}

func (d *Dashboard) inboxMessage(q *req) error {
	m, err := d.reads.InboxMessage(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	data := parsed(m)
	data.Remote = q.r.URL.Query().Get("remote") == "1"
	return d.render(q, 0, "message", m.Subject, data)
}

func (d *Dashboard) inboxHTML(q *req) error {
	m, err := d.reads.InboxMessage(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeMailHTML(q, parsed(m).HTML)
}

func (d *Dashboard) inboxRaw(q *req) error {
	m, err := d.reads.InboxMessage(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	q.w.Header().Set("Content-Disposition", `attachment; filename="`+m.ID+`.eml"`)
	q.w.WriteHeader(http.StatusOK)
	_, err = q.w.Write(m.Raw)
	return err
}
