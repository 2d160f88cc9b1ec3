package idempotency

import "context"

type hintKey struct{}

// WithDecisionHint marks the context of a transaction that decides sc
// first: Run does it for its writes (stores read it with DecisionHint).
func WithDecisionHint(ctx context.Context, sc Scope) context.Context {
	return context.WithValue(ctx, hintKey{}, sc)
}

// DecisionHint returns the scope whose key the transaction run with ctx
// decides first, if Run said so. A store that runs many transactions in
// one batch may lock and read the batch's keys in one statement before it
// runs them; what it found must be exactly what DecideIdempotency would
// have found at its turn (the key locked for the batch's transaction).
func DecisionHint(ctx context.Context) (Scope, bool) {
	sc, ok := ctx.Value(hintKey{}).(Scope)
	return sc, ok
}
