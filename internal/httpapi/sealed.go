package httpapi

import (
	"bytes"
	"fmt"

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
func (s *Server) sealStored(o postOpts, body []byte) ([]byte, error) {
	if !o.secret || s.cfg.SecretKey == "" {
		return body, nil
	}
	out, err := seal.Seal([]byte(sealedAnswerHead), s.cfg.SecretKey, sealedAnswerInfo, body)
	if err != nil {
		return nil, fmt.Errorf("seal the stored answer: %w", err)
	}
	return out, nil
}

// openStored returns a stored answer's bytes as they were answered.
func (s *Server) openStored(body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(sealedAnswerHead)) {
		return body, nil
	}
	plain, err := seal.Open(body, len(sealedAnswerHead), s.cfg.SecretKey, sealedAnswerInfo)
	if err != nil {
		return nil, fmt.Errorf("open the stored answer (was SENDONCE_SECRET_KEY changed?): %w", err)
	}
	return plain, nil
}
