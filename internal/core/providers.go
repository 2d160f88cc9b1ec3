package core

import (
	"context"
	"time"
)

// SendProvider says which provider transport holds a send (API contract
// section 15): set when a provider took it (MessageID its id), or when an
// attempt's answer was lost (MessageID ""), which pins the send's later
// attempts to that transport: another one could send it twice.
type SendProvider struct {
	SendID string
	Tenant string
	// Transport is the transport's URL with its credentials redacted.
	Transport string
	// Provider is the transport's kind: "ses" or "resend".
	Provider string
	// MessageID is the provider's id for the message; "" while unknown.
	MessageID string
	// Since is when the send was first handed to this transport.
	Since     time.Time
	UpdatedAt time.Time
}

// Providers reads the provider of a send.
type Providers interface {
	// SendProvider returns the send's provider record; ErrNotFound.
	SendProvider(ctx context.Context, sendID string) (*SendProvider, error)
}

// ProvidersTx records providers and finds the send a provider's event is
// about.
type ProvidersTx interface {
	// SetSendProvider stores p: a new record, or the send's record with
	// its transport, provider and message id replaced (Since kept when the
	// transport is the same).
	SetSendProvider(ctx context.Context, p *SendProvider) error
	// AddProviderCopy records a provider's id for one copy of a send
	// that goes out as one copy per recipient, so that
	// SendByProviderMessage finds the send by it too. Once per id.
	AddProviderCopy(ctx context.Context, sendID, provider, messageID string) error
	// SendByProviderMessage returns the send a provider's message id
	// (its record's, or one of its copies') names, read for update, with
	// the send's provider record; ErrNotFound.
	SendByProviderMessage(ctx context.Context, provider, messageID string) (*Send, *SendProvider, error)
	// SendByMessageID returns the send a provider's report names by its
	// Message-ID (with angle brackets) when the provider's own id for it
	// is not known, read for update, with its provider record (nil when it
	// has none). With sendID (the report's send id tag) it is that send,
	// if its Message-ID is id; without, the one send handed to provider
	// whose provider id never came back with that Message-ID. Message-IDs
	// are not unique (a client's message keeps its own): none, or more
	// than one, is ErrNotFound.
	SendByMessageID(ctx context.Context, provider, id, sendID string) (*Send, *SendProvider, error)
}
