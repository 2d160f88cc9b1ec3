package accesslog

import (
	"context"
	"sync/atomic"
)

// Sampled writes one in Every of the lines of answers below 400 to
// Logger, and every line of a 4xx or 5xx: under a retry storm the lines
// of the replays (the same request, answered the same way, thousands of
// times a second) are what an operator can do without, and a refusal or
// an error is what they look for. Every ≤ 1 writes every line. The
// requests themselves are all counted in the metrics
// (sendonce_http_requests_total), sampled or not.
type Sampled struct {
	Logger Logger
	Every  uint64
	n      atomic.Uint64
}

// Log implements Logger.
func (s *Sampled) Log(ctx context.Context, l Line) {
	if s.Every > 1 && l.Status < 400 && s.n.Add(1)%s.Every != 1 {
		return
	}
	s.Logger.Log(ctx, l)
}
