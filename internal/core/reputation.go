package core

import (
	"context"
	"time"
)

// The reputation guard (docs/deliverability.md, "The reputation guard"):
// a tenant's bulk stream pauses when its complaints or permanent bounces
// over the bulk mail it handed off in a rolling window reach a threshold.

// Reputation outcome kinds: what a recipient of a bulk send did that
// counts against the tenant's reputation.
const (
	OutcomeComplaint = "complaint"
	OutcomeBounce    = "bounce" // a permanent bounce
)

// Stream states (tenant_streams.state).
const (
	StreamActive = "active"
	StreamPaused = "paused"
)

// StreamOutcome is one complaint or permanent bounce of one recipient of
// a bulk send; the same (send, recipient, kind) counts once however many
// reports say it.
type StreamOutcome struct {
	Tenant    string
	Stream    Stream
	SendID    string
	Recipient string
	Kind      string // OutcomeComplaint or OutcomeBounce
	At        time.Time
}

// StreamState is a tenant's stream: active or paused, since when, and
// the start of the mail its rates judge (the last resume: a resumed
// stream is judged on the mail sent after it).
type StreamState struct {
	Tenant    string
	Stream    Stream
	State     string // StreamActive or StreamPaused
	ChangedAt time.Time
	// JudgeFrom is the last resume (zero when it never was).
	JudgeFrom time.Time
}

// StreamCounts is a stream's mail in a window: the sends handed off
// (relay-sent counts as delivered) and their complaints and permanent
// bounces.
type StreamCounts struct {
	Sends, Complaints, Bounces int
}

// StreamBucket is StreamCounts for one interval of a series.
type StreamBucket struct {
	Start time.Time
	StreamCounts
}

// SenderCounts is StreamCounts of the mail one From address (as rendered
// on the send) handed off: the guard sums them by sending domain.
type SenderCounts struct {
	From string
	StreamCounts
}

// StreamWindowParams names a tenant's stream and the window counted.
type StreamWindowParams struct {
	Tenant string
	Stream Stream
	Since  time.Time
}

// Reputation reads the guard's state.
type Reputation interface {
	// StreamState returns the tenant's stream (active, with zero times,
	// when it has no row).
	StreamState(ctx context.Context, tenant string, stream Stream) (*StreamState, error)
	// StreamCounts counts the stream's mail since p.Since.
	StreamCounts(ctx context.Context, p StreamWindowParams) (StreamCounts, error)
	// StreamSenderCounts counts the stream's mail since p.Since per From
	// address, in no order; nil when the window holds more addresses than
	// a store tells apart (sqlstore: 1,000).
	StreamSenderCounts(ctx context.Context, p StreamWindowParams) ([]SenderCounts, error)
	// StreamSeries counts the stream's mail since p.Since in buckets of
	// step, oldest first; empty buckets are left out.
	StreamSeries(ctx context.Context, p StreamWindowParams, step time.Duration) ([]StreamBucket, error)
	// GuardedStreams lists up to limit stream rows (tenants whose stream
	// the guard has judged), for the metrics.
	GuardedStreams(ctx context.Context, limit int) ([]*StreamState, error)
}

// ReputationTx changes the guard's state. One decision across processes:
// LockStream serializes the tenant's judgements, and SetStreamState
// changes the row only from the other state, so two processes judging at
// once change it (and queue its event) once.
type ReputationTx interface {
	// RecordStreamOutcome stores an outcome; first is false when the same
	// one was stored before.
	RecordStreamOutcome(ctx context.Context, o StreamOutcome) (first bool, err error)
	// LockStream makes the stream's row (active) when it has none and
	// locks it until the transaction ends; later reads of the transaction
	// see what the judgements before it committed.
	LockStream(ctx context.Context, tenant string, stream Stream, now time.Time) (*StreamState, error)
	// StreamCounts is Reputation.StreamCounts inside the transaction.
	StreamCounts(ctx context.Context, p StreamWindowParams) (StreamCounts, error)
	// StreamSenderCounts is Reputation.StreamSenderCounts inside the
	// transaction.
	StreamSenderCounts(ctx context.Context, p StreamWindowParams) ([]SenderCounts, error)
	// SetStreamState moves the stream to state (StreamActive sets
	// JudgeFrom to now) and reports whether it changed: false when it was
	// in that state already, or has no row.
	SetStreamState(ctx context.Context, tenant string, stream Stream, state string, now time.Time) (changed bool, err error)
}
