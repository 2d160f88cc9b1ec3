package submission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"
	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Scope of SMTP keys: a tenant's SMTP keys are one namespace, apart from
// every HTTP route's.
const (
	scopeMethod = "SMTP"
	scopeRoute  = "submission"
)

// keyHeaders name the idempotency key of a submitted message, in order of
// precedence; both are removed before the message is stored.
var keyHeaders = []string{"Idempotency-Key", "Resend-Idempotency-Key"}

// envelope is a message's SMTP transaction.
type envelope struct {
	from, mailbox string
	rcpt          []string
}

// storedAnswer is what the idempotency record keeps of a 250.
type storedAnswer struct {
	ID string `json:"id"`
}

func reply(code int, enh smtp.EnhancedCode, msg string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: code, EnhancedCode: enh, Message: msg}
}

// submit accepts one message: the key and fingerprint, the engine's
// decision, then — on Proceed — the send and the key's answer in one
// transaction, as POST /v1/send does (httpapi's runTx). The reply is
// written by the caller after this returns, so a 250 is never sent before
// the commit.
func (s *Server) submit(ctx context.Context, key *core.APIKey, env envelope, data []byte) *smtp.SMTPError {
	start := time.Now()
	h, msg, fpMsg, idemKey, source, rerr := readSubmission(data)
	if rerr != nil {
		return rerr
	}
	sub := app.RawSubmission{IdemKey: idemKey, MailboxID: env.mailbox, Rcpt: env.rcpt, Header: h, Msg: msg}
	keyHeader := source != "" && source != derivedSource
	fp := fingerprints{now: fingerprint(env, fpMsg, keyHeader), legacy: func() string { return legacyFingerprint(env, fpMsg) }}
	rep, sendID, out := s.acceptOnce(ctx, key, sub, source == derivedSource, fp)
	s.logger.LogAttrs(ctx, slog.LevelInfo, "smtp message",
		slog.Int("code", rep.Code), slog.String("send_id", sendID), slog.String("outcome", string(out)),
		slog.String("key", app.KeyFingerprint(key)), slog.String("idempotency_key_from", source),
		slog.Int("recipients", len(env.rcpt)), slog.Int("bytes", len(data)), slog.Duration("duration", time.Since(start)))
	if key.Agent {
		s.audit(ctx, key, idemKey, rep, sendID, out)
	}
	return rep
}

// readSubmission parses a submitted message, once. It refuses bare CR or
// LF (RFC 5321 forbids them, and a next hop that reads "\r.\r\n" as the
// end of data would take what follows as another message: SMTP
// smuggling), takes the idempotency key header out, and drops Bcc, as
// Postfix and Exim do: delivered, it tells every recipient who else got
// the mail. msg is what will be delivered; fpMsg what the fingerprint
// covers — the message as submitted less the key header, Bcc and all, so
// that the same key with another Bcc is other content; idemKey comes from
// the key header or, without one, the Message-ID (source says which).
func readSubmission(data []byte) (h textproto.Header, msg, fpMsg []byte, idemKey, source string, rerr *smtp.SMTPError) {
	if bareLineEnd(data) {
		return h, nil, nil, "", "", reply(550, smtp.EnhancedCode{5, 6, 0}, "the message has a bare CR or LF: every line must end in CRLF")
	}
	h, body, err := message.ReadRaw(data)
	if err != nil {
		return h, nil, nil, "", "", reply(550, smtp.EnhancedCode{5, 6, 0}, "the message's header does not parse")
	}
	for _, name := range keyHeaders {
		if v := h.Get(name); v != "" && idemKey == "" {
			if idemKey, err = idempotency.ParseKey(v, idempotency.MaxKeyLen); err != nil {
				return h, nil, nil, "", "", reply(550, smtp.EnhancedCode{5, 6, 0}, fmt.Sprintf("the %s header must be 1 to %d visible ASCII characters", name, idempotency.MaxKeyLen))
			}
			source = name
		}
	}
	for _, name := range keyHeaders {
		h.Del(name) // the key is not part of the message delivered
	}
	fpMsg = data
	if source != "" {
		fpMsg = message.WriteRaw(h, body)
	}
	msg = fpMsg
	if h.Has("Bcc") {
		h.Del("Bcc")
		msg = message.WriteRaw(h, body)
	}
	if source == "" {
		if id := strings.TrimSpace(h.Get("Message-Id")); id != "" {
			idemKey, source = messageIDKey(id), derivedSource
		}
	}
	return h, msg, fpMsg, idemKey, source, nil
}

// bareLineEnd reports a CR not followed by LF, or an LF not preceded by
// CR.
func bareLineEnd(data []byte) bool {
	for i, c := range data {
		switch {
		case c == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			return true
		case c == '\n' && (i == 0 || data[i-1] != '\r'):
			return true
		}
	}
	return false
}

// messageIDKey is the key a Message-ID makes: the msg-id without its
// brackets, or — too long or not visible ASCII (an SMTPUTF8 id) — its
// SHA-256, so that every Message-ID dedupes.
func messageIDKey(id string) string {
	inner := strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
	if k, err := idempotency.ParseKey(inner, idempotency.MaxKeyLen); err == nil && k == inner {
		return k
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// outcome is what acceptOnce did with a message, as the log and the
// audit log name it.
type outcome string

const (
	outAccepted outcome = "accepted"
	outReplayed outcome = "replayed"
	outInUse    outcome = "in_use"  // the key's first message is still being accepted
	outReused   outcome = "reused"  // the key holds another message
	outRefused  outcome = "refused" // the message was refused (its reply says why)
	outError    outcome = "error"   // nothing was accepted; the client tries again
)

// fingerprints are a submission's fingerprint and, made only when the
// key's record has another, the one versions before what-it-says stored.
type fingerprints struct {
	now    string
	legacy func() string
}

// acceptOnce runs the acceptance through the one write protocol
// (idempotency.Run): the key decided, the send and the key's answer
// committed in one transaction. It returns the reply, the send's id and
// the outcome for the log.
func (s *Server) acceptOnce(ctx context.Context, key *core.APIKey, sub app.RawSubmission, derived bool, fps fingerprints) (*smtp.SMTPError, string, outcome) {
	var sendID string
	fp := fps.now
	sc, earlier := s.scope(key, sub.IdemKey, derived, fps)
	ran := idempotency.Run(ctx, s.idem, idempotency.Write[core.Tx]{
		Scope: sc, Fingerprint: fp, InTx: s.svc.InTx, Earlier: earlier,
		Prepare: func(ctx context.Context) (idempotency.Step[core.Tx], error) {
			send, err := s.svc.PrepareRawSend(ctx, key, sub)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				if err := s.svc.AcceptSend(ctx, tx, key, send); err != nil {
					return idempotency.Response{}, err
				}
				sendID = send.ID
				answer, err := json.Marshal(storedAnswer{ID: send.ID})
				return idempotency.Response{Status: 250, ContentType: "application/json", Body: answer}, err
			}, nil
		},
		// A refusal is answered, not stored: its SMTP code is no status
		// the key keeps (idempotency.ShouldStore), and the same message
		// is refused again for the same reason.
		Refuse: func(err error) (idempotency.Response, bool) {
			if code := core.ErrorCode(err); code == core.CodeInternal || core.IsConflicted(err) {
				return idempotency.Response{}, false
			}
			return idempotency.Response{Status: 550}, true
		},
	})
	switch {
	case ran.Refused:
		return replyFor(ctx, s.logger, ran.Err), "", outRefused
	case ran.Err != nil:
		return replyFor(ctx, s.logger, ran.Err), "", outError // before the outcome: Begin's failure has none
	case ran.Outcome == idempotency.Mismatch:
		return s.mismatch(ctx, *sc, fps)
	case ran.Outcome != idempotency.Proceed:
		return s.decided(idempotency.Decision{Outcome: ran.Outcome, Response: ran.Response})
	}
	if s.metrics != nil {
		s.metrics.SendsAccepted.Inc()
		s.metrics.SMTPMessages.WithLabelValues(string(outAccepted)).Inc()
	}
	return reply(250, smtp.EnhancedCode{2, 0, 0}, "OK: queued as "+sendID), sendID, outAccepted
}

// decided answers a key the engine decided without running the message.
func (s *Server) decided(d idempotency.Decision) (*smtp.SMTPError, string, outcome) {
	switch d.Outcome {
	case idempotency.Replay:
		var a storedAnswer
		if d.Response == nil || json.Unmarshal(d.Response.Body, &a) != nil || a.ID == "" {
			return errTempFailure, "", outError
		}
		if s.metrics != nil {
			s.metrics.IdempotentReplays.Inc()
			s.metrics.SMTPMessages.WithLabelValues(string(outReplayed)).Inc()
			s.metrics.DuplicatePrevented(metrics.ViaSMTP)
		}
		return reply(250, smtp.EnhancedCode{2, 0, 0}, "OK: already accepted as "+a.ID+"; not sent again"), a.ID, outReplayed
	case idempotency.InUse:
		if s.metrics != nil {
			s.metrics.IdempotencyConflict("in_use")
		}
		return reply(451, smtp.EnhancedCode{4, 7, 0}, "a message with this idempotency key is still being accepted; try again shortly"), "", outInUse
	}
	return errTempFailure, "", outError
}

// mismatch answers a key whose record holds another fingerprint. A record
// made before fingerprints covered what a message says holds its bytes'
// fingerprint: a retry with the same bytes replays it. Otherwise the key
// holds another message: 554, naming the send that holds it and never
// advising a new key, for a client that meets it on a retry would make
// that key a second email.
func (s *Server) mismatch(ctx context.Context, sc idempotency.Scope, fps fingerprints) (*smtp.SMTPError, string, outcome) {
	rec, err := s.svc.CompletedIdempotency(ctx, sc)
	if err != nil {
		return replyFor(ctx, s.logger, err), "", outError
	}
	if rec != nil && !strings.HasPrefix(rec.Fingerprint, fingerprintVersion) && rec.Fingerprint == fps.legacy() {
		return s.decided(idempotency.Decision{Outcome: idempotency.Replay, Response: rec.Response})
	}
	if s.metrics != nil {
		s.metrics.IdempotencyConflict("reused")
	}
	holder := "another send"
	var a storedAnswer
	if rec != nil && rec.Response != nil && json.Unmarshal(rec.Response.Body, &a) == nil && a.ID != "" {
		holder = a.ID
	}
	return reply(554, smtp.EnhancedCode{5, 7, 0}, "this idempotency key already belongs to "+holder+
		", accepted with other content; that send stands and this message was not accepted"), "", outReused
}

// replyFor turns an application error into its SMTP reply. Errors that
// are not the caller's are logged and answered 451: nothing was accepted.
func replyFor(ctx context.Context, logger *slog.Logger, err error) *smtp.SMTPError {
	var e *core.Error
	if !errors.As(err, &e) {
		logger.ErrorContext(ctx, "smtp accept", slog.Any("error", err))
		return errTempFailure
	}
	switch e.Code {
	case core.CodeForbidden:
		return reply(550, smtp.EnhancedCode{5, 7, 1}, e.Message)
	case core.CodeValidation, core.CodeInvalidJSON:
		if e.Param == "to" {
			return reply(553, smtp.EnhancedCode{5, 1, 3}, e.Message)
		}
		return reply(550, smtp.EnhancedCode{5, 6, 0}, e.Message)
	case core.CodeRateLimited:
		return reply(451, smtp.EnhancedCode{4, 7, 1}, e.Message)
	case core.CodeUnauthorized:
		return errAuthFailed
	case core.CodeUnavailable:
		return errTempFailure
	}
	logger.ErrorContext(ctx, "smtp accept", slog.Any("error", err))
	return errTempFailure
}

// audit writes an agent key's message to the audit log, as the HTTP send
// routes do, with the SMTP reply code as its status.
func (s *Server) audit(ctx context.Context, key *core.APIKey, idemKey string, rep *smtp.SMTPError, sendID string, out outcome) {
	e := &core.AuditEntry{Tenant: key.Tenant, APIKeyID: key.ID, Route: "SMTP DATA", IdempotencyKey: idemKey, Status: rep.Code, SendID: sendID}
	switch out {
	case outAccepted:
		e.Outcome = "created"
	case outReplayed, outError:
		e.Outcome = string(out)
	default:
		e.Outcome, e.Code, e.Detail = "refused", string(out), rep.Message
	}
	ctx = context.WithoutCancel(ctx)
	if err := s.svc.RecordAudit(ctx, e); err != nil {
		s.logger.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}
