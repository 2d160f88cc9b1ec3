package kit

import (
	"net/http"
	"net/mail"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// MessageHeads is whose mailbox a message is sent from, who it is from
// and to, and its subject, named as POST /v1/send names them: the send
// object, a draft and a send's preview carry these fields in this order.
type MessageHeads struct {
	MailboxID string   `json:"mailbox_id"`
	From      string   `json:"from"`
	To        []string `json:"to"`
	Cc        []string `json:"cc"`
	Bcc       []string `json:"bcc"`
	ReplyTo   []string `json:"reply_to"`
	Subject   string   `json:"subject"`
}

// HeadsOf is s's heads, every list [] rather than null.
func HeadsOf(s *core.Send) MessageHeads {
	return MessageHeads{MailboxID: s.MailboxID, From: s.From, To: NonNil(s.To), Cc: NonNil(s.Cc), Bcc: NonNil(s.Bcc),
		ReplyTo: NonNil(s.ReplyTo), Subject: s.Subject}
}

// SendView is the send object of docs/api.md.
type SendView struct {
	ID             string      `json:"id"`
	Object         string      `json:"object"`
	Status         core.Status `json:"status"`
	IdempotencyKey *string     `json:"idempotency_key"`
	MessageHeads
	TemplateID  *string           `json:"template_id"`
	MessageID   string            `json:"message_id"`
	Attempts    int               `json:"attempts"`
	LastError   *string           `json:"last_error"`
	Tags        map[string]string `json:"tags"`
	CreatedAt   string            `json:"created_at"`
	UpdatedAt   string            `json:"updated_at"`
	SentAt      *string           `json:"sent_at"`
	Recipients  []recipientView   `json:"recipients"`
	ScheduledAt *string           `json:"scheduled_at"`
	Attachments int               `json:"attachments"`
	// Stream: docs/api.md, "Streams".
	Stream core.Stream `json:"stream"`
	// Provider and ProviderMessageID: the provider that took the send
	// and its id there (section 15); null otherwise.
	Provider          *string     `json:"provider"`
	ProviderMessageID *string     `json:"provider_message_id"`
	Events            []EventView `json:"events,omitempty"`
}

type EventView struct {
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	At        string      `json:"at"`
	Detail    string      `json:"detail"`
	Recipient string      `json:"recipient,omitempty"`
	Bounce    *bounceView `json:"bounce,omitempty"`
}

// recipientView is one recipient's own outcome (docs/api.md, "The send object").
type recipientView struct {
	Email  string      `json:"email"`
	Status core.Status `json:"status"`
	Detail *string     `json:"detail"`
}

// viewRecipients lists every recipient of the send once, in to, cc, bcc
// order, with its stored state or else the one its send's status gives.
func viewRecipients(s *core.Send) []recipientView {
	out := []recipientView{}
	seen := map[string]bool{}
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			addr := r
			if a, err := mail.ParseAddress(r); err == nil {
				addr = a.Address
			}
			key := core.NormalizeAddress(addr)
			if seen[key] {
				continue
			}
			seen[key] = true
			v := recipientView{Email: addr, Status: core.RecipientStatusOf(s.Status)}
			for _, st := range s.Recipients {
				if st.Address == key {
					v.Status, v.Detail = st.Status, OptString(st.Detail)
				}
			}
			out = append(out, v)
		}
	}
	return out
}

// bounceView is a core.Bounce in the names of Resend's bounce object.
type bounceView struct {
	Type           string   `json:"type"`
	SubType        string   `json:"subType"`
	Status         string   `json:"status"`
	Message        string   `json:"message"`
	DiagnosticCode []string `json:"diagnosticCode"`
}

func ViewBounce(b *core.Bounce) *bounceView {
	if b == nil {
		return nil
	}
	return &bounceView{Type: b.Type, SubType: b.SubType, Status: b.Status, Message: b.Message, DiagnosticCode: NonNil(b.DiagnosticCode)}
}

func RFC3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func OptString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func OptTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := RFC3339(*t)
	return &s
}

// Views is view of each item, in order: a list's data, [] for none.
func Views[T, V any](items []T, view func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
}

// TryViews is Views for a view that can fail: the first error stops it.
func TryViews[T, V any](items []T, view func(T) (V, error)) ([]V, error) {
	out := make([]V, 0, len(items))
	for _, it := range items {
		v, err := view(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// NonNil is s, or an empty slice for nil: a view's lists are [] in JSON,
// never null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func ViewSend(s *core.Send) *SendView {
	tags := s.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return &SendView{
		ID: s.ID, Object: "send", Status: s.Status, IdempotencyKey: OptString(s.IdempotencyKey), MessageHeads: HeadsOf(s),
		TemplateID: OptString(s.TemplateID), MessageID: s.MessageID, Attempts: s.Attempts, LastError: OptString(s.LastError),
		Tags: tags, CreatedAt: RFC3339(s.CreatedAt), UpdatedAt: RFC3339(s.UpdatedAt), SentAt: OptTime(s.SentAt),
		Recipients:  viewRecipients(s),
		ScheduledAt: OptTime(s.ScheduledAt), Attachments: max(s.AttachmentCount, len(s.Attachments)),
		Provider: OptString(s.Provider), ProviderMessageID: OptString(s.ProviderMessageID),
		Stream: s.Stream.Or(core.StreamTransactional),
	}
}

type ListView[T any] struct {
	Object string  `json:"object"`
	Data   []T     `json:"data"`
	Next   *string `json:"next"`
}

type TemplateView struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Subject   string `json:"subject"`
	Text      string `json:"text"`
	HTML      string `json:"html"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func ViewTemplate(t *core.Template) TemplateView {
	return TemplateView{ID: t.ID, Object: "template", Subject: t.Subject, Text: t.Text, HTML: t.HTML,
		CreatedAt: RFC3339(t.CreatedAt), UpdatedAt: RFC3339(t.UpdatedAt)}
}

type MailboxView struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Address     string  `json:"address"`
	Name        string  `json:"name"`
	Transport   *string `json:"transport"`
	ReceiveOnly bool    `json:"receive_only"`
	// IMAP is the connected mailbox's URL without its password.
	IMAP      *string `json:"imap"`
	CreatedAt *string `json:"created_at"`
}

func ViewMailbox(m *core.Mailbox) MailboxView {
	v := MailboxView{ID: m.ID, Object: "mailbox", Address: m.Address, Name: m.Name, ReceiveOnly: m.ReceiveOnly}
	if m.Transport != "" {
		// Credentials are never returned.
		red := "smtp://(invalid)"
		if sp, err := transport.ParseSpec(m.Transport); err == nil && sp.Kind != transport.Capture && sp.Kind != transport.Direct {
			red = sp.Redacted()
		}
		v.Transport = &red
	}
	if m.IMAP != nil {
		shown := m.IMAPShown
		v.IMAP = &shown
	}
	if !m.CreatedAt.IsZero() {
		v.CreatedAt = OptTime(&m.CreatedAt)
	}
	return v
}

type InboxView struct {
	ID         string   `json:"id"`
	Object     string   `json:"object"`
	SendID     string   `json:"send_id"`
	MessageID  string   `json:"message_id"`
	From       string   `json:"from"`
	To         []string `json:"to"`
	Subject    string   `json:"subject"`
	Size       int      `json:"size"`
	ReceivedAt string   `json:"received_at"`
	Raw        *string  `json:"raw,omitempty"`
}

func ViewInbox(m *core.InboxMessage, withRaw bool) InboxView {
	v := InboxView{ID: m.ID, Object: "inbox_message", SendID: m.SendID, MessageID: m.MessageID, From: m.From,
		To: NonNil(m.To), Subject: m.Subject, Size: len(m.Raw), ReceivedAt: RFC3339(m.ReceivedAt)}
	if withRaw {
		raw := string(m.Raw)
		v.Raw = &raw
	}
	return v
}

// SuppressionFilter reads ?limit, ?after, ?email and ?origin.
func SuppressionFilter(r *http.Request) (core.SuppressionFilter, error) {
	q := r.URL.Query()
	limit, err := ParseLimit(q.Get("limit"))
	if err != nil {
		return core.SuppressionFilter{}, err
	}
	f := core.SuppressionFilter{Email: q.Get("email"), Origin: q.Get("origin"), Limit: limit, After: q.Get("after")}
	switch f.Origin {
	case "", core.SuppressionBounce, core.SuppressionComplaint, core.SuppressionManual, core.SuppressionUnsubscribe:
	default:
		return f, core.Errorf(core.CodeValidation, "origin", "origin must be bounce, complaint, manual or unsubscribe")
	}
	return f, nil
}
