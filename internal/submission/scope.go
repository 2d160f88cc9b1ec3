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

// scope is the scoped key a submission is decided under (nil without a
// key): derived keys in messageIDForm, a restricted API key's in the
// namespace of its limits (core.StoredIdempotencyKey). When that form is
// not the plain key every key was stored under before, replay is the
// answer an older form holds for a retry of a message accepted before the
// upgrade (app.Service.OlderFormReplay), nil when none holds one.
func (s *Server) scope(ctx context.Context, key *core.APIKey, idemKey string, derived bool, fps fingerprints) (sc *idempotency.Scope, replay *idempotency.Response, err error) {
	if idemKey == "" {
		return nil, nil, nil
	}
	stored := idemKey
	if derived {
		stored = messageIDForm + idemKey
	}
	sc = &idempotency.Scope{Tenant: key.Tenant, Method: scopeMethod, Route: scopeRoute, Key: core.StoredIdempotencyKey(key, stored)}
	if sc.Key == idemKey {
		return sc, nil, nil // an unrestricted key's explicit key: stored plain, as always
	}
	plain := *sc
	plain.Key = idemKey
	olds := []idempotency.Scope{plain}
	if key.OwnsIdempotencyKeys() {
		perKey := *sc
		perKey.Key = core.KeyScopedIdempotencyKey(key, stored)
		olds = append(olds, perKey)
	}
	// Older versions stored the bytes fingerprint too.
	for _, fp := range []string{fps.now, fps.legacy()} {
		if replay, err = s.svc.OlderFormReplay(ctx, olds, fp, s.idem.TTL()); replay != nil || err != nil {
			break
		}
	}
	return sc, replay, err
}
