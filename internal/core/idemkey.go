package core

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// A restricted key's Idempotency-Keys live in the namespace of what it may
// do. Keys of one tenant otherwise share one namespace per route, so a key
// limited to some mailboxes, or an agent's key, could claim a key another
// key of the tenant is about to use (a predictable one, or one derived from
// a Message-ID) and make that key's request replay or be refused. The
// namespace is named by the key's limits, not by the key: the contract
// scopes keys to the tenant so that rotating an API key never makes a retry
// a second send, and a rotated key with the same limits is the same
// namespace. Keys with equal limits may do the same things, so sharing a
// namespace gives neither anything it could not do itself.

// OwnsIdempotencyKeys reports whether the key's Idempotency-Keys live in a
// namespace of its limits: an agent's key, or a key limited to some
// mailboxes. An unrestricted key keeps the tenant's shared namespace (the
// one every key used before), so its requests stay one lookup.
func (k *APIKey) OwnsIdempotencyKeys() bool {
	return k.Agent || len(k.Mailboxes) > 0
}

// SharesIdempotencyKeys reports whether k and o decide Idempotency-Keys in
// one namespace: both unrestricted, or restricted with the same limits.
func (k *APIKey) SharesIdempotencyKeys(o *APIKey) bool {
	if k.Tenant != o.Tenant {
		return false
	}
	return idempotencyProfile(k) == idempotencyProfile(o)
}

// idempotencyProfile names what a key may do, as far as its Idempotency-Key
// namespace goes: whether it is an agent's, and its mailboxes in order.
func idempotencyProfile(k *APIKey) string {
	if !k.OwnsIdempotencyKeys() {
		return ""
	}
	mailboxes := slices.Clone(k.Mailboxes)
	slices.Sort(mailboxes)
	mailboxes = slices.Compact(mailboxes)
	agent := "0"
	if k.Agent {
		agent = "1"
	}
	return "agent=" + agent + ";mailboxes=" + strings.Join(mailboxes, ",")
}

// StoredIdempotencyKey is the form idem — a caller's Idempotency-Key, or
// one derived for it — is stored under for k: "lim ", a digest of the key's
// limits (fixed length however many mailboxes it names), a space and idem.
// The separator is a space, which no Idempotency-Key may contain (visible
// ASCII only), so no caller's key can spell another namespace's form.
func StoredIdempotencyKey(k *APIKey, idem string) string {
	if !k.OwnsIdempotencyKeys() {
		return idem
	}
	sum := sha256.Sum256([]byte(idempotencyProfile(k)))
	return "lim " + hex.EncodeToString(sum[:16]) + " " + idem
}

// KeyScopedIdempotencyKey is the form a restricted key's Idempotency-Key was
// stored under before namespaces were named by limits: one per API key.
// Retries within one idempotency TTL of the upgrade are looked up there too,
// so a request accepted before it replays instead of running again.
func KeyScopedIdempotencyKey(k *APIKey, idem string) string {
	return "key " + k.ID + " " + idem
}
