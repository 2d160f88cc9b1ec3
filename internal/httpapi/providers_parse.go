package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// sesEvent is an SES event notification: configuration-set event
// publishing ("eventType") or identity notifications ("notificationType"),
// as docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html
// and …/notification-contents.html describe them.
type sesEvent struct {
	EventType        string `json:"eventType"`
	NotificationType string `json:"notificationType"`
	Mail             struct {
		MessageID     string              `json:"messageId"`
		Destination   []string            `json:"destination"`
		Tags          map[string][]string `json:"tags"`
		CommonHeaders struct {
			MessageID string `json:"messageId"`
		} `json:"commonHeaders"`
	} `json:"mail"`
	Bounce struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			Status         string `json:"status"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
		ComplaintFeedbackType string `json:"complaintFeedbackType"`
		UserAgent             string `json:"userAgent"`
	} `json:"complaint"`
	Delivery struct {
		Recipients   []string `json:"recipients"`
		SMTPResponse string   `json:"smtpResponse"`
	} `json:"delivery"`
	DeliveryDelay struct {
		DelayType         string `json:"delayType"`
		DelayedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			Status         string `json:"status"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"delayedRecipients"`
	} `json:"deliveryDelay"`
	Reject struct {
		Reason string `json:"reason"`
	} `json:"reject"`
	Failure struct {
		ErrorMessage string `json:"errorMessage"`
	} `json:"failure"`
}

// parseSESEvent reads an SES event (an SNS notification's Message) as a
// app.ProviderEvent; eventID is the SNS message's id. ok is false for event
// types sendonce does not record (Open, Click, Subscription).
func parseSESEvent(eventID string, message []byte) (ev app.ProviderEvent, ok bool, err error) {
	var e sesEvent
	if err := json.Unmarshal(message, &e); err != nil {
		return ev, false, fmt.Errorf("not an SES event: %w", err)
	}
	typ := e.EventType
	if typ == "" {
		typ = e.NotificationType
	}
	if e.Mail.MessageID == "" {
		return ev, false, errors.New("not an SES event: no mail.messageId")
	}
	ev = app.ProviderEvent{Provider: "ses", EventID: eventID, Type: typ, ProviderMessageID: e.Mail.MessageID,
		MessageID: e.Mail.CommonHeaders.MessageID}
	if v := e.Mail.Tags["sendonce_send_id"]; len(v) == 1 {
		ev.SendID = v[0]
	}
	switch typ {
	case "Send":
		ev.Accepted = true
	case "Delivery":
		ev.Accepted = true
		for _, r := range e.Delivery.Recipients {
			ev.Changes = append(ev.Changes, app.RecipientChange{Address: r, Status: core.StatusDelivered, Event: core.EventDelivered,
				Detail: strings.TrimSpace("delivered by SES: " + e.Delivery.SMTPResponse)})
		}
	case "Bounce":
		typ := core.BounceTransient
		if e.Bounce.BounceType == "Permanent" {
			typ = core.BouncePermanent
		}
		for _, r := range e.Bounce.BouncedRecipients {
			ev.Changes = append(ev.Changes, app.BounceChange(r.EmailAddress, typ, e.Bounce.BounceSubType, r.Status, r.DiagnosticCode,
				"SES reported a "+strings.ToLower(e.Bounce.BounceType)+" bounce"))
		}
	case "Complaint":
		for _, r := range e.Complaint.ComplainedRecipients {
			detail := "complaint (" + e.Complaint.ComplaintFeedbackType + ") reported by SES"
			ev.Changes = append(ev.Changes, app.RecipientChange{Address: r.EmailAddress, Status: core.StatusComplained,
				Event: core.EventComplained, Detail: detail, Suppress: detail, Origin: core.SuppressionComplaint})
		}
	case "DeliveryDelay":
		for _, r := range e.DeliveryDelay.DelayedRecipients {
			ev.Changes = append(ev.Changes, app.BounceChange(r.EmailAddress, core.BounceTransient, e.DeliveryDelay.DelayType, r.Status,
				r.DiagnosticCode, "SES reports the delivery delayed ("+e.DeliveryDelay.DelayType+")"))
		}
	case "Reject":
		ev.Failed, ev.Detail = true, "rejected: "+e.Reject.Reason
	case "Rendering Failure", "RenderingFailure":
		ev.Failed, ev.Detail = true, "rendering failure: "+e.Failure.ErrorMessage
	default:
		return ev, false, nil
	}
	return ev, true, nil
}

// resendWebhook is a Resend webhook's body
// (resend.com/docs/dashboard/webhooks/event-types).
type resendWebhook struct {
	Type string `json:"type"`
	Data struct {
		EmailID string            `json:"email_id"`
		To      []string          `json:"to"`
		Tags    map[string]string `json:"tags"`
		Headers []struct {
			Name, Value string
		} `json:"headers"`
		Bounce struct {
			Type    string `json:"type"`
			SubType string `json:"subType"`
			Message string `json:"message"`
		} `json:"bounce"`
		Failed struct {
			Reason string `json:"reason"`
		} `json:"failed"`
	} `json:"data"`
}

// parseResendEvent reads a Resend webhook as a app.ProviderEvent; eventID is
// its svix-id. ok is false for types sendonce does not record.
func parseResendEvent(eventID string, body []byte) (ev app.ProviderEvent, ok bool, err error) {
	var w resendWebhook
	if err := json.Unmarshal(body, &w); err != nil {
		return ev, false, fmt.Errorf("not a Resend webhook: %w", err)
	}
	if w.Data.EmailID == "" {
		return ev, false, errors.New("not a Resend email event: no data.email_id")
	}
	ev = app.ProviderEvent{Provider: "resend", EventID: eventID, Type: w.Type, ProviderMessageID: w.Data.EmailID,
		SendID: w.Data.Tags["sendonce_send_id"]}
	for _, h := range w.Data.Headers {
		if strings.EqualFold(h.Name, "Message-ID") {
			ev.MessageID = h.Value
		}
	}
	each := func(c app.RecipientChange) {
		for _, to := range w.Data.To {
			c.Address = to
			ev.Changes = append(ev.Changes, c)
		}
	}
	switch w.Type {
	case "email.sent":
		ev.Accepted = true
	case "email.delivered":
		ev.Accepted = true
		each(app.RecipientChange{Status: core.StatusDelivered, Event: core.EventDelivered, Detail: "delivered, Resend reports"})
	case "email.bounced":
		typ := core.BounceTransient
		if w.Data.Bounce.Type == "Permanent" {
			typ = core.BouncePermanent
		}
		for _, to := range w.Data.To {
			ev.Changes = append(ev.Changes, app.BounceChange(to, typ, w.Data.Bounce.SubType, "", "", w.Data.Bounce.Message))
		}
	case "email.complained":
		const detail = "complaint reported by Resend"
		each(app.RecipientChange{Status: core.StatusComplained, Event: core.EventComplained, Detail: detail,
			Suppress: detail, Origin: core.SuppressionComplaint})
	case "email.delivery_delayed":
		each(app.RecipientChange{Status: core.RecipientDelayed, Event: core.EventDeliveryDelayed, Detail: "delivery delayed, Resend reports",
			Bounce: &core.Bounce{Type: core.BounceTransient, SubType: "General", Message: "delivery delayed, Resend reports"}})
	case "email.failed":
		ev.Failed, ev.Detail = true, "failed: "+w.Data.Failed.Reason
	default:
		return ev, false, nil
	}
	return ev, true, nil
}
