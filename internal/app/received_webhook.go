package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// receivedPayload is Resend's email.received body: the message's
// metadata; the content is fetched by id (GET /emails/receiving/{id}).
type receivedPayload struct {
	Type      string       `json:"type"`
	CreatedAt string       `json:"created_at"`
	Data      receivedData `json:"data"`
}

type receivedData struct {
	EmailID     string               `json:"email_id"`
	CreatedAt   string               `json:"created_at"`
	From        string               `json:"from"`
	To          []string             `json:"to"`
	Cc          []string             `json:"cc"`
	Bcc         []string             `json:"bcc"`
	MessageID   string               `json:"message_id"`
	Subject     string               `json:"subject"`
	InboxID     string               `json:"inbox_id"`
	ThreadID    string               `json:"thread_id"`
	Attachments []receivedAttachment `json:"attachments"`
}

type receivedAttachment struct {
	ID                 string `json:"id"`
	Filename           string `json:"filename"`
	ContentType        string `json:"content_type"`
	ContentDisposition string `json:"content_disposition"`
	ContentID          string `json:"content_id,omitempty"`
}

func queueReceivedWebhook(ctx context.Context, tx core.Tx, m *core.ReceivedMessage) error {
	at := m.ReceivedAt.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	d := receivedData{EmailID: m.ID, CreatedAt: at, From: m.From, To: nonNilStrings(m.To), Cc: nonNilStrings(m.Cc),
		Bcc: []string{}, MessageID: m.MessageID, Subject: m.Subject, InboxID: m.MailboxID, ThreadID: m.ThreadID,
		Attachments: []receivedAttachment{}}
	for _, a := range m.Attachments {
		d.Attachments = append(d.Attachments, receivedAttachment{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType,
			ContentDisposition: a.Disposition, ContentID: a.ContentID})
	}
	body, err := json.Marshal(receivedPayload{Type: "email.received", CreatedAt: at, Data: d})
	if err != nil {
		return fmt.Errorf("email.received payload: %w", err)
	}
	return tx.QueueTenantWebhook(ctx, m.Tenant, core.EventReceived, NewID("evt_"), m.ID, body, m.ReceivedAt)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// mailboxPayload is the body of mailbox.disconnected and mailbox.connected.
type mailboxPayload struct {
	Type      string      `json:"type"`
	CreatedAt string      `json:"created_at"`
	Data      mailboxData `json:"data"`
}

type mailboxData struct {
	MailboxID string `json:"mailbox_id"`
	// Reason is a class ("IMAP login failed", …), never the server's text.
	Reason string `json:"reason,omitempty"`
}

// MailboxEvent tells the tenant's webhooks that a connected mailbox lost
// its IMAP connection (why, as a class) or regained it. The syncer calls
// it once per change, not once per retry.
func (s *Service) MailboxEvent(ctx context.Context, tenant, mailboxID string, connected bool, reason string) error {
	typ, event := "mailbox.disconnected", core.EventMailboxDisconnected
	if connected {
		typ, event, reason = "mailbox.connected", core.EventMailboxConnected, ""
	}
	at := s.Now()
	body, err := json.Marshal(mailboxPayload{Type: typ, CreatedAt: at.Format("2006-01-02T15:04:05.000000Z07:00"),
		Data: mailboxData{MailboxID: mailboxID, Reason: reason}})
	if err != nil {
		return fmt.Errorf("%s payload: %w", typ, err)
	}
	return s.store.InTx(ctx, func(tx core.Tx) error {
		return tx.QueueTenantWebhook(ctx, tenant, event, NewID("evt_"), mailboxID, body, at)
	})
}
