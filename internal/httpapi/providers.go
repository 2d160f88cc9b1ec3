package httpapi

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/sns"
	"github.com/sendonce/sendonce/webhooksig"
)

// The provider intake routes (API contract section 15): Amazon SNS
// notifications of SES events and Resend's webhooks. Their authentication
// is the provider's signature, not an API key: a message that does not
// verify is 403 and nothing is recorded. The send an event is about is
// found by the provider's ids (app.RecordProviderEvent), so the tenant is
// that send's; an event naming no such send is answered 200 (the provider
// must not retry it) and recorded nowhere.

// MaxProviderEventBytes bounds an intake request: SNS messages are at most
// 256 KiB, Resend's webhooks far less.
const MaxProviderEventBytes = 512 << 10

func readIntake(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxProviderEventBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		kit.WriteJSON(w, http.StatusRequestEntityTooLarge, kit.NewErrorBody(core.CodeValidation, "the event is too large", ""))
		return nil, err
	}
	if err != nil {
		kit.WriteJSON(w, http.StatusBadRequest, kit.NewErrorBody(core.CodeInvalidJSON, "the body could not be read", ""))
	}
	return b, err
}

func forbiddenIntake(w http.ResponseWriter) {
	kit.WriteJSON(w, http.StatusForbidden, kit.NewErrorBody(core.CodeForbidden, "the signature does not verify", ""))
}

func (s *Server) handleSESEvents(w http.ResponseWriter, r *http.Request) {
	v := s.Cfg.Providers.SNS
	if v == nil || len(s.Cfg.Providers.SNSTopics) == 0 {
		kit.WriteJSON(w, http.StatusNotFound, kit.NewErrorBody(core.CodeNotFound, "SES event intake is not configured", ""))
		return
	}
	body, err := readIntake(w, r)
	if err != nil {
		return
	}
	m, err := sns.Parse(body)
	if err != nil {
		kit.WriteJSON(w, http.StatusBadRequest, kit.NewErrorBody(core.CodeInvalidJSON, "not an SNS message", ""))
		return
	}
	// Checked before the signature, so another topic's message makes
	// sendonce fetch nothing (no certificate, no SubscribeURL).
	if !slices.Contains(s.Cfg.Providers.SNSTopics, m.TopicArn) {
		s.Logger.WarnContext(r.Context(), "SNS message from a topic not named by --ses-sns-topic refused",
			slog.String("message_id", m.MessageId), slog.String("topic", m.TopicArn))
		kit.WriteJSON(w, http.StatusForbidden, kit.NewErrorBody(core.CodeForbidden, "the topic is not one this server takes", ""))
		return
	}
	if err := v.Verify(r.Context(), m); err != nil {
		s.Logger.WarnContext(r.Context(), "SNS message refused", slog.String("message_id", m.MessageId), slog.Any("error", err))
		forbiddenIntake(w)
		return
	}
	switch m.Type {
	case "SubscriptionConfirmation":
		if err := v.Confirm(r.Context(), m); err != nil {
			s.Logger.WarnContext(r.Context(), "SNS subscription not confirmed", slog.String("topic", m.TopicArn), slog.Any("error", err))
			kit.WriteJSON(w, http.StatusBadGateway, kit.NewErrorBody(core.CodeUnavailable, "the subscription could not be confirmed", ""))
			return
		}
		s.Logger.InfoContext(r.Context(), "SNS subscription confirmed", slog.String("topic", m.TopicArn))
	case "Notification":
		ev, ok, err := parseSESEvent(m.MessageId, []byte(m.Message))
		if err != nil {
			s.Logger.WarnContext(r.Context(), "SNS notification is not an SES event", slog.String("message_id", m.MessageId), slog.Any("error", err))
		}
		if ok {
			s.recordProviderEvent(w, r, ev)
			return
		}
	}
	kit.WriteJSON(w, http.StatusOK, map[string]string{"result": "ignored"})
}

func (s *Server) handleResendEvents(w http.ResponseWriter, r *http.Request) {
	if s.Cfg.Providers.ResendSecret == "" {
		kit.WriteJSON(w, http.StatusNotFound, kit.NewErrorBody(core.CodeNotFound, "Resend event intake is not configured", ""))
		return
	}
	body, err := readIntake(w, r)
	if err != nil {
		return
	}
	// Svix signs as Standard Webhooks does, under its own header names.
	h := http.Header{}
	h.Set("webhook-id", r.Header.Get("svix-id"))
	h.Set("webhook-timestamp", r.Header.Get("svix-timestamp"))
	h.Set("webhook-signature", r.Header.Get("svix-signature"))
	if err := webhooksig.Verify(s.Cfg.Providers.ResendSecret, h, body, 5*time.Minute, time.Now()); err != nil {
		s.Logger.WarnContext(r.Context(), "Resend webhook refused", slog.Any("error", err))
		forbiddenIntake(w)
		return
	}
	ev, ok, err := parseResendEvent(r.Header.Get("svix-id"), body)
	if err != nil {
		kit.WriteJSON(w, http.StatusBadRequest, kit.NewErrorBody(core.CodeInvalidJSON, "not a Resend email event", ""))
		return
	}
	if !ok {
		kit.WriteJSON(w, http.StatusOK, map[string]string{"result": "ignored"})
		return
	}
	s.recordProviderEvent(w, r, ev)
}

func (s *Server) recordProviderEvent(w http.ResponseWriter, r *http.Request, ev app.ProviderEvent) {
	res, err := s.Svc.RecordProviderEvent(r.Context(), ev)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err) // 5xx: the provider retries it
		return
	}
	s.Logger.InfoContext(r.Context(), "provider event", slog.String("provider", ev.Provider), slog.String("type", ev.Type),
		slog.String("provider_message_id", ev.ProviderMessageID), slog.String("result", string(res)))
	kit.WriteJSON(w, http.StatusOK, map[string]string{"result": string(res)})
}
