package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// sendBenchBody is a realistic POST /v1/send body: two recipients in both
// forms, a name in From, text and HTML, variables, headers and tags.
var sendBenchBody = []byte(`{
  "to": ["Ada Lovelace <ada@example.com>", "charles@example.org"],
  "cc": "Grace <grace@example.net>",
  "reply_to": "support@example.com",
  "from": "Example Shop <orders@example.com>",
  "subject": "Your order #10442 has shipped",
  "text": "Hello Ada,\n\nYour order #10442 is on its way. Track it at https://example.com/t/10442.\n\nThanks for shopping with us.",
  "html": "<p>Hello Ada,</p><p>Your order <b>#10442</b> is on its way. <a href=\"https://example.com/t/10442\">Track it</a>.</p><p>Thanks for shopping with us.</p>",
  "variables": {"name": "Ada", "order": 10442, "items": [{"sku": "A-1", "qty": 2}]},
  "headers": {"X-Campaign": "shipping"},
  "tags": {"kind": "transactional", "tenant": "shop-7"}
}`)

// BenchmarkDecodeSendRequest measures decodeStrict on the send route's
// request type: unknown-field checking and the address lists' own decoding.
// Its yardstick is BenchmarkDecodeSendRequest_Yardstick.
func BenchmarkDecodeSendRequest(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(sendBenchBody)))
	for b.Loop() {
		var req kit.SendRequest
		if err := kit.DecodeStrict(sendBenchBody, &req); err != nil {
			b.Fatal(err)
		}
		if len(req.To) != 2 {
			b.Fatalf("to = %v", req.To)
		}
	}
}

// plainSendRequest is sendRequest as a plain struct: an address list is
// whatever JSON holds (a string or an array), attachments are maps.
type plainSendRequest struct {
	To          any               `json:"to"`
	Cc          any               `json:"cc"`
	Bcc         any               `json:"bcc"`
	ReplyTo     any               `json:"reply_to"`
	From        string            `json:"from"`
	MailboxID   string            `json:"mailbox_id"`
	Subject     string            `json:"subject"`
	Text        string            `json:"text"`
	HTML        string            `json:"html"`
	TemplateID  string            `json:"template_id"`
	Variables   map[string]any    `json:"variables"`
	Headers     map[string]string `json:"headers"`
	Tags        map[string]string `json:"tags"`
	Attachments []map[string]any  `json:"attachments"`
	ScheduledAt string            `json:"scheduled_at"`
}

// BenchmarkDecodeSendRequest_Yardstick decodes the same body with
// json.Unmarshal into plainSendRequest: no unknown-field check, no
// address-list type. The ratio is what decoding strictly into the
// route's own types costs beyond encoding/json's plain work.
func BenchmarkDecodeSendRequest_Yardstick(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(sendBenchBody)))
	for b.Loop() {
		var req plainSendRequest
		if err := json.Unmarshal(sendBenchBody, &req); err != nil {
			b.Fatal(err)
		}
		if to, _ := req.To.([]any); len(to) != 2 || req.ReplyTo == nil {
			b.Fatalf("to = %v", req.To)
		}
	}
}
