package core

// Stream is the kind of mail a send is (docs/api.md, "Streams"): it
// decides which of a tenant's sends are claimed first and, under the mx
// transport, which egress pool the mail leaves from.
type Stream string

const (
	// StreamTransactional is mail a person waits for (a password reset, a
	// receipt): claimed before the tenant's bulk mail. The default.
	StreamTransactional Stream = "transactional"
	// StreamBulk is mail nobody waits for (newsletters, campaigns): it
	// goes out when no transactional send of its tenant is due.
	StreamBulk Stream = "bulk"
)

// Streams are the streams in the order ClaimDue serves them.
var Streams = []Stream{StreamTransactional, StreamBulk}

// Valid reports whether s is one of the streams above.
func (s Stream) Valid() bool { return s == StreamTransactional || s == StreamBulk }

// Or is s, or def when s is empty: a send's stream from its request and
// its key's default.
func (s Stream) Or(def Stream) Stream {
	if s == "" {
		return def
	}
	return s
}
