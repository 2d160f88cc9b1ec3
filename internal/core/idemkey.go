package core

// A restricted key's Idempotency-Keys are its own. Keys of one tenant
// otherwise share one namespace per route, so a key limited to some
// mailboxes, or an agent's key, could claim a key another key of the tenant
// is about to use (a predictable one, or one derived from a Message-ID) and
// make that key's request replay or be refused. The stored form of a
// restricted key's Idempotency-Key therefore names the API key; callers
// never see it.

// OwnsIdempotencyKeys reports whether the key's Idempotency-Keys live in a
// namespace of its own: an agent's key, or a key limited to some
// mailboxes. An unrestricted key keeps the tenant's shared namespace (the
// one every key used before), so its requests stay one lookup.
func (k *APIKey) OwnsIdempotencyKeys() bool {
	return k.Agent || len(k.Mailboxes) > 0
}

// StoredIdempotencyKey is the form idem — a caller's Idempotency-Key, or
// one derived for it — is stored under for k. The separator is a space,
// which no Idempotency-Key may contain (visible ASCII only), so no
// caller's key can spell another key's stored form.
func StoredIdempotencyKey(k *APIKey, idem string) string {
	if !k.OwnsIdempotencyKeys() {
		return idem
	}
	return "key " + k.ID + " " + idem
}
