package core

import "slices"

// Names of the entries of a send's history. Those that report a change the
// docs/webhooks.md lists are also webhook events: WebhookType gives
// their "email.…" name. The others (accepted, attempt_started,
// attempt_failed, late_attempt_result, …) are history only.
const (
	EventAccepted       = "accepted"
	EventAttemptStarted = "attempt_started"
	EventAttemptFailed  = "attempt_failed"
	// EventLateAttemptResult: an attempt's result arrived after the send
	// was decided without it (kept for whoever reconciles).
	EventLateAttemptResult = "late_attempt_result"
	// EventHandoff: one transport an attempt tried, and what it answered
	// (provider transports and failover chains, section 15).
	EventHandoff  = "handoff"
	EventApproved = "approved"
	// EventReconciled: reconcile with outcome resend (sent and failed
	// write EventSent and EventFailed).
	EventReconciled      = "reconciled"
	EventScheduled       = "scheduled"
	EventSent            = "sent"
	EventDelivered       = "delivered"
	EventDeliveryDelayed = "delivery_delayed"
	EventBounced         = "bounced"
	EventComplained      = "complained"
	EventFailed          = "failed"
	EventSuppressed      = "suppressed"
	// EventUnsubscribed: a recipient unsubscribed from the tenant's bulk
	// mail through the send's unsubscribe link or address.
	EventUnsubscribed = "unsubscribed"
	EventCanceled     = "canceled"
	EventUnknown      = "unknown"
	// EventReplied: a reply to the send was received (history only:
	// the received message has its own webhook, email.received).
	EventReplied = "replied"
	// EventReceived names email.received, a webhook event about a received
	// message, never a send's history entry.
	EventReceived = "received"
	// EventMailboxDisconnected and EventMailboxConnected name the webhook
	// events of a connected mailbox whose login failed, and came back.
	EventMailboxDisconnected = "mailbox_disconnected"
	EventMailboxConnected    = "mailbox_connected"
	// EventStreamPaused and EventStreamResumed name the webhook events of
	// a tenant's bulk stream paused by the reputation guard, and resumed.
	EventStreamPaused  = "stream_paused"
	EventStreamResumed = "stream_resumed"
)

// webhookTypes maps history entries to the webhook event types of the API
// contract (section 10).
var webhookTypes = map[string]string{
	EventScheduled:       "email.scheduled",
	EventSent:            "email.sent",
	EventDelivered:       "email.delivered",
	EventDeliveryDelayed: "email.delivery_delayed",
	EventBounced:         "email.bounced",
	EventComplained:      "email.complained",
	EventFailed:          "email.failed",
	EventSuppressed:      "email.suppressed",
	EventUnsubscribed:    "email.unsubscribed",
	EventCanceled:        "email.canceled",
	EventUnknown:         "email.unknown",
	EventReceived:        "email.received",
	// Not about a send: queued by app.MailboxEvent.
	EventMailboxDisconnected: "mailbox.disconnected",
	EventMailboxConnected:    "mailbox.connected",
	// Not about a send: queued by the reputation guard (app).
	EventStreamPaused:  "stream.paused",
	EventStreamResumed: "stream.resumed",
}

// WebhookType returns the webhook event type of a history entry, and false
// for entries that are history only.
func WebhookType(eventType string) (string, bool) {
	t, ok := webhookTypes[eventType]
	return t, ok
}

// WebhookTypes lists every webhook event type, for validating subscriptions.
func WebhookTypes() []string {
	out := make([]string, 0, len(webhookTypes))
	for _, t := range webhookTypes {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// EventOfWebhookType is WebhookType's inverse: the history entry name of a
// webhook event type, and false for a type that is not one.
func EventOfWebhookType(webhookType string) (string, bool) {
	for e, t := range webhookTypes {
		if t == webhookType {
			return e, true
		}
	}
	return "", false
}
