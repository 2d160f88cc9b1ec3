package core

import "context"

type backgroundKey struct{}

// Background marks ctx's writes as background work — delivery's claims and
// outcome records — that may wait behind the writes callers are waiting
// for (accepts): a store with one writer gives them a bounded share of
// each commit instead of an equal place in line (sqlstore's group commit).
// They are never starved: they get their share whenever they wait.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx was marked by Background.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}
