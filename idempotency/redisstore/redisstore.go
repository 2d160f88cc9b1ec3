// Package redisstore is an idempotency.Store that keeps records in Redis
// (github.com/redis/go-redis/v9), on a single server or a Redis Cluster.
// It lives apart from package idempotency so that the Redis client is
// linked only into programs that use it.
package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/idempotency/idemtype"
)

// Store keeps records in Redis (github.com/redis/go-redis/v9), on a
// single server or a Redis Cluster.
//
// Each scoped key is one Redis hash named Prefix + "{" + SHA-256 of the
// scope + "}". The braces are a Redis Cluster hash tag: everything a key
// needs lives in one slot, so every script below touches one key and runs
// atomically on whichever node owns it. Reserve, Complete and Release are
// Lua scripts; the rules themselves (Decide) run in Go on the record the
// reserve script returns, and a take-over is a compare-and-set on the old
// reservation's token. Reservations expire in Redis after their lease,
// completed records after their TTL.
//
// What Redis cannot give: the handler's side effect (a row in your
// database, a call to a payment API) and the stored response are not one
// transaction. If the process dies after the side effect and before
// Complete, or the handler answers 5xx after doing it, or Complete fails,
// the key is free again once the reservation is released or its lease runs
// out, and a retry runs the handler a second time. The handler must make
// that second run harmless itself, typically with a unique constraint on
// the idempotency key in its own table (see idempotency.ScopeFromContext): the second
// insert fails, and the handler answers with what the first one created.
// When your side effects live in a SQL database, idempotency.SQLStore
// with idempotency.Options.RunInTx gives the real guarantee instead.
type Store struct {
	c      redis.Scripter
	prefix string
}

// New returns a store that uses client (a *redis.Client,
// *redis.ClusterClient or *redis.Ring) and names its keys with prefix
// (defaults to "idempotency:").
func New(client redis.Scripter, prefix string) *Store {
	if prefix == "" {
		prefix = "idempotency:"
	}
	return &Store{c: client, prefix: prefix}
}

// The record hash's fields: fp, state, token, locked (unix µs), expires
// (unix µs), status, ctype, body.

// reserveScript creates a reservation when the key has no record, and
// otherwise returns the record unchanged for idemtype.Decide.
// KEYS[1] record; ARGV fingerprint, token, locked_until, ttl_ms.
var reserveScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HMGET', KEYS[1], 'fp', 'state', 'token', 'locked', 'expires', 'status', 'ctype', 'body')
end
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'in_flight', 'token', ARGV[2], 'locked', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// takeoverScript replaces the record whose token is ARGV[1] (or no record)
// with a fresh reservation; 0 when someone else changed it first.
// KEYS[1] record; ARGV old token, fingerprint, token, locked_until, ttl_ms.
var takeoverScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'token')
if cur and cur ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fp', ARGV[2], 'state', 'in_flight', 'token', ARGV[3], 'locked', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

// completeScript stores the response if ARGV[1] still holds the key.
// KEYS[1] record; ARGV token, status, content type, body, expires, ttl_ms.
var completeScript = redis.NewScript(`
local rec = redis.call('HMGET', KEYS[1], 'state', 'token')
if rec[1] ~= 'in_flight' or rec[2] ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'completed', 'status', ARGV[2], 'ctype', ARGV[3], 'body', ARGV[4], 'expires', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
`)

// releaseScript drops the reservation if ARGV[1] still holds the key.
var releaseScript = redis.NewScript(`
local rec = redis.call('HMGET', KEYS[1], 'state', 'token')
if rec[1] == 'in_flight' and rec[2] == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// redisReserveAttempts bounds the compare-and-set loop of Reserve: each
// failed attempt means another request changed the key in between.
const redisReserveAttempts = 5

func (s *Store) key(sc idemtype.Scope) string {
	h := sha256.New()
	for _, part := range []string{sc.Tenant, sc.Method, sc.Route, sc.Key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return s.prefix + "{" + hex.EncodeToString(h.Sum(nil)) + "}"
}

func ttlMillis(d time.Duration) int64 {
	if ms := d.Milliseconds(); ms > 0 {
		return ms
	}
	return 1
}

// Reserve implements Store.
func (s *Store) Reserve(ctx context.Context, sc idemtype.Scope, fingerprint string, now time.Time, lease time.Duration) (idemtype.Decision, error) {
	k := []string{s.key(sc)}
	locked := strconv.FormatInt(now.Add(lease).UnixMicro(), 10)
	ttl := ttlMillis(lease)
	for range redisReserveAttempts {
		token := idemtype.NewToken()
		v, err := reserveScript.Run(ctx, s.c, k, fingerprint, token, locked, ttl).Result()
		if err != nil {
			return idemtype.Decision{}, fmt.Errorf("redis reserve: %w", err)
		}
		fields, ok := v.([]any)
		if !ok {
			return idemtype.Decision{Outcome: idemtype.Proceed, Token: token}, nil
		}
		rec, err := parseRecord(fields)
		if err != nil {
			return idemtype.Decision{}, err
		}
		if rec == nil { // expired between EXISTS and HMGET cannot happen in a script; be safe
			continue
		}
		switch o := idemtype.Decide(rec, fingerprint, now); o {
		case idemtype.Replay:
			return idemtype.Decision{Outcome: idemtype.Replay, Response: rec.Response}, nil
		case idemtype.Proceed:
			n, err := takeoverScript.Run(ctx, s.c, k, rec.Token, fingerprint, token, locked, ttl).Int()
			if err != nil {
				return idemtype.Decision{}, fmt.Errorf("redis take over: %w", err)
			}
			if n == 1 {
				return idemtype.Decision{Outcome: idemtype.Proceed, Token: token}, nil
			}
		default:
			return idemtype.Decision{Outcome: o}, nil
		}
	}
	return idemtype.Decision{}, idemtype.ErrContended
}

func parseRecord(f []any) (*idemtype.Record, error) {
	if len(f) != 8 {
		return nil, fmt.Errorf("redis record: %d fields, want 8", len(f))
	}
	str := func(i int) string { s, _ := f[i].(string); return s }
	if str(1) == "" {
		return nil, nil
	}
	rec := &idemtype.Record{Fingerprint: str(0), State: idemtype.State(str(1)), Token: str(2)}
	micros := func(i int) (time.Time, error) {
		if str(i) == "" {
			return time.Time{}, nil
		}
		n, err := strconv.ParseInt(str(i), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("redis record: bad time: %w", err)
		}
		return time.UnixMicro(n), nil
	}
	var err error
	if rec.LockedUntil, err = micros(3); err != nil {
		return nil, err
	}
	if rec.ExpiresAt, err = micros(4); err != nil {
		return nil, err
	}
	if rec.State == idemtype.StateCompleted {
		status, err := strconv.Atoi(str(5))
		if err != nil {
			return nil, fmt.Errorf("redis record: bad status: %w", err)
		}
		rec.Response = &idemtype.Response{Status: status, ContentType: str(6), Body: []byte(str(7))}
	}
	return rec, nil
}

// Complete implements Store.
func (s *Store) Complete(ctx context.Context, sc idemtype.Scope, token string, resp idemtype.Response, now, expires time.Time) error {
	n, err := completeScript.Run(ctx, s.c, []string{s.key(sc)}, token, resp.Status, resp.ContentType, resp.Body,
		expires.UnixMicro(), ttlMillis(expires.Sub(now))).Int()
	if err != nil {
		return fmt.Errorf("redis complete: %w", err)
	}
	if n != 1 {
		return idemtype.ErrReservationLost
	}
	return nil
}

// Release implements Store.
func (s *Store) Release(ctx context.Context, sc idemtype.Scope, token string) error {
	if err := releaseScript.Run(ctx, s.c, []string{s.key(sc)}, token).Err(); err != nil {
		return fmt.Errorf("redis release: %w", err)
	}
	return nil
}
