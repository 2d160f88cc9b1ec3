package idempotency

import (
	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/idempotency/redisstore"
)

// RedisStore keeps records in Redis; see package redisstore.
//
// Deprecated: use redisstore.Store. This alias, and with it this
// package's import of the Redis client, goes in a later release.
type RedisStore = redisstore.Store

// NewRedisStore is redisstore.New.
//
// Deprecated: use redisstore.New.
func NewRedisStore(client redis.Scripter, prefix string) *RedisStore {
	return redisstore.New(client, prefix)
}
