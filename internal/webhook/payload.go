package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// Payload is a delivery's body, in Resend's shapes: {"type", "created_at",
// "data": {…}}.
type Payload struct {
	Type      string      `json:"type"`
	CreatedAt string      `json:"created_at"`
	Data      PayloadData `json:"data"`
}

// PayloadData is the send an event is about. Bounce, Failed and
// Suppressed are set on the events of those names; Recipient (a sendonce
// addition) on events about one recipient.
type PayloadData struct {
	EmailID    string            `json:"email_id"`
	CreatedAt  string            `json:"created_at"`
	From       string            `json:"from"`
	To         []string          `json:"to"`
	Subject    string            `json:"subject"`
	MessageID  string            `json:"message_id"`
	TemplateID string            `json:"template_id,omitempty"`
	Tags       map[string]string `json:"tags"`
	Recipient  string            `json:"recipient,omitempty"`
	Bounce     *PayloadBounce    `json:"bounce,omitempty"`
	Failed     *PayloadReason    `json:"failed,omitempty"`
	Suppressed *PayloadMessage   `json:"suppressed,omitempty"`
}

// PayloadBounce is Resend's bounce object, with the enhanced status code
// and the remote MTA's words.
type PayloadBounce struct {
	Type           string   `json:"type"`
	SubType        string   `json:"subType"`
	Message        string   `json:"message"`
	Status         string   `json:"status,omitempty"`
	DiagnosticCode []string `json:"diagnosticCode"`
}

// PayloadReason is Resend's failed object.
type PayloadReason struct {
	Reason string `json:"reason"`
}

// PayloadMessage is Resend's suppressed object.
type PayloadMessage struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Build returns the body of event e of send s, whose webhook type is
// webhookType. It is built once per delivery and kept: every retry sends
// these bytes.
func Build(s *core.Send, e core.Event, webhookType string) ([]byte, error) {
	tags := s.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	to := s.To
	if to == nil {
		to = []string{}
	}
	p := Payload{Type: webhookType, CreatedAt: stamp(e.At), Data: PayloadData{
		EmailID: s.ID, CreatedAt: stamp(s.CreatedAt), From: s.From, To: to, Subject: s.Subject,
		MessageID: s.MessageID, TemplateID: s.TemplateID, Tags: tags, Recipient: e.Recipient,
	}}
	switch e.Type {
	case core.EventBounced, core.EventDeliveryDelayed:
		if b := e.Bounce; b != nil {
			diag := b.DiagnosticCode
			if diag == nil {
				diag = []string{}
			}
			p.Data.Bounce = &PayloadBounce{Type: b.Type, SubType: b.SubType, Message: b.Message, Status: b.Status, DiagnosticCode: diag}
		}
	case core.EventFailed:
		p.Data.Failed = &PayloadReason{Reason: e.Detail}
	case core.EventSuppressed:
		p.Data.Suppressed = &PayloadMessage{Message: e.Detail, Type: "OnAccountSuppressionList"}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("webhook payload: %w", err)
	}
	return b, nil
}
