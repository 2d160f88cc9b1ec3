package submission

import (
	"context"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// derivedSource names a key taken from the Message-ID (the log's
// idempotency_key_from).
const derivedSource = "Message-ID"

// messageIDForm is what a key derived from a Message-ID is stored under:
// "msgid " and the key. An explicit key header can never spell it (a key
// has no space), so a message's explicit key and another message's
// Message-ID never meet. The send keeps the key without it.
const messageIDForm = "msgid "

// scope is the scope a submission is decided under (nil without a key)
// and the look at older forms idempotency.Run takes first
// (app.Service.IdempotencyScope): derived keys in messageIDForm, a
// restricted API key's in the namespace of its limits; versions before
// what-it-says stored the bytes fingerprint too.
func (s *Server) scope(key *core.APIKey, idemKey string, derived bool, fps fingerprints) (*idempotency.Scope, func(context.Context) (*idempotency.Response, error)) {
	if idemKey == "" {
		return nil, nil
	}
	stored := idemKey
	if derived {
		stored = messageIDForm + idemKey
	}
	return s.svc.IdempotencyScope(key, scopeMethod, scopeRoute, stored, idemKey, s.idem.TTL(), fps.now, fps.legacy)
}
