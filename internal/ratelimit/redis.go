package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// incr counts one request in a window's key; the key expires with its
// window (plus a second, for clocks a little apart), so Redis keeps one
// small key per active client.
var incr = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`)

// Redis is a Limiter whose counts live in Redis, shared by every process
// that uses the same Redis and prefix. The window is computed on the
// process's clock: processes whose clocks differ by d see windows start d
// apart, which for a guard is close enough.
//
// When Redis fails the request is counted by the fallback, this process's
// own memory: a Redis outage loosens the limit to one per process instead
// of refusing every request or lifting the limit altogether.
type Redis struct {
	rdb      redis.Scripter
	prefix   string
	now      func() time.Time
	fallback *Memory
	logger   *slog.Logger
}

// NewRedis returns a Limiter on rdb whose keys start with prefix.
func NewRedis(rdb redis.Scripter, prefix string, now func() time.Time, logger *slog.Logger) *Redis {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Redis{rdb: rdb, prefix: prefix, now: now, fallback: NewMemory(now), logger: logger}
}

// Take implements Limiter. Its error is always nil: a Redis failure is
// logged and answered by the fallback.
func (r *Redis) Take(ctx context.Context, key string, l Limit) (Result, error) {
	idx, left := window(r.now(), l.Window)
	k := r.prefix + key + ":" + strconv.FormatInt(int64(l.Window/time.Millisecond), 10) + ":" + strconv.FormatInt(idx, 10)
	n, err := incr.Run(ctx, r.rdb, []string{k}, (left + time.Second).Milliseconds()).Int64()
	if err != nil {
		r.logger.WarnContext(ctx, "rate limit: redis failed, counting in this process", slog.Any("error", fmt.Errorf("redis incr: %w", err)))
		return r.fallback.Take(ctx, key, l)
	}
	return result(l, n, left), nil
}
