package kit

import (
	"bytes"
	"fmt"
	"log/slog"

	"github.com/sendonce/sendonce/internal/seal"
)

// A stored answer that carries a secret — a webhook's signing secret,
// shown once on create and rotate, and again to a retry with the same key —
// is kept sealed under SENDONCE_SECRET_KEY for as long as its key replays,
// like the secret's own row: whoever reads the database does not read it
// there either. A JSON answer never starts with the head's NUL, so a
// sealed one is told apart by its first bytes; answers stored without a
// secret key (or before this) are plain and pass through.

const (
	sealedAnswerHead = "\x00sealed-answer:v1:"
	sealedAnswerInfo = "sendonce stored answer v1"
)

// sealStored seals body when the route's answer carries a secret and a
// secret key is set.
func (s *Base) sealStored(o PostOpts, body []byte) ([]byte, error) {
	if !o.Secret || s.Cfg.SecretKey == "" {
		return body, nil
	}
	out, err := seal.Seal([]byte(sealedAnswerHead), s.Cfg.SecretKey, sealedAnswerInfo, body)
	if err != nil {
		return nil, fmt.Errorf("seal the stored answer: %w", err)
	}
	return out, nil
}

// openStored returns a stored answer's bytes as they were answered.
func (s *Base) openStored(body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(sealedAnswerHead)) {
		return body, nil
	}
	plain, err := seal.Open(body, len(sealedAnswerHead), s.Cfg.SecretKey, sealedAnswerInfo)
	if err != nil {
		// The request ran and its answer is stored, but sealed under a
		// secret key this process no longer holds (SENDONCE_SECRET_KEY was
		// changed, or unset). Running it again would make a second webhook;
		// a 500 would say nothing was stored. The class is logged, never
		// the error's text or the body.
		s.Logger.Warn("stored answer unavailable", slog.String("class", codeAnswerUnavailable),
			slog.Bool("secret_key_set", s.Cfg.SecretKey != ""))
		return nil, ApiError(codeAnswerUnavailable, "Idempotency-Key",
			"this Idempotency-Key's request ran, but its stored answer was sealed under another SENDONCE_SECRET_KEY and cannot be shown; it will not run again")
	}
	return plain, nil
}
