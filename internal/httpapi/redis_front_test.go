package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/idempotency/redisstore"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// With --redis, a replay is answered by Redis (here proven by removing the
// database's record first), while the database stays the source of truth
// (a flushed Redis changes nothing a client can see), and concurrent
// duplicates still make one send.
func TestRedisFront_ReplaysFromRedisDatabaseStaysTruth(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Redis: true, NoReplayCache: true}, func(t *testing.T, env *sendoncetest.Env) {
		opts, err := redis.ParseURL(os.Getenv("SENDONCE_TEST_REDIS_URL"))
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opts)
		t.Cleanup(func() {
			ctx := context.Background()
			if keys, err := rdb.Keys(ctx, env.RedisPrefix+"*").Result(); err == nil && len(keys) > 0 {
				rdb.Del(ctx, keys...)
			}
			rdb.Close()
		})
		ctx := context.Background()

		// Served from Redis: the database no longer has the record.
		body1 := mail(t, "ann@example.com", "front one")
		first := post(t, env, env.AdminKey, "front-1", body1)
		requireOriginal(t, first, http.StatusOK)
		fp, _ := idempotency.Fingerprint(body1)
		sc := idempotency.Scope{Tenant: "default", Method: "POST", Route: "/v1/send", Key: "front-1"}
		if d, err := redisstore.New(rdb, env.RedisPrefix).Reserve(ctx, sc, fp, time.Now(), time.Minute); err != nil || d.Outcome != idempotency.Replay {
			t.Fatalf("Redis holds no completed record for the key: %v %v", d.Outcome, err)
		}
		env.ForgetIdempotencyKey(t, "front-1")
		requireReplayOf(t, first, post(t, env, env.AdminKey, "front-1", body1))

		// The database is the truth: with Redis flushed, the replay is the same.
		body2 := mail(t, "bob@example.com", "front two")
		second := post(t, env, env.AdminKey, "front-2", body2)
		requireOriginal(t, second, http.StatusOK)
		keys, err := rdb.Keys(ctx, env.RedisPrefix+"*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("no Redis keys under the prefix: %v", err)
		}
		rdb.Del(ctx, keys...)
		requireReplayOf(t, second, post(t, env, env.AdminKey, "front-2", body2))
		if r := post(t, env, env.AdminKey, "front-2", mail(t, "bob@example.com", "changed")); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("changed body after a Redis flush: %d %s, want 422", r.Status, r.Body)
		}

		// Concurrent duplicates: one send, one message.
		body3 := mail(t, "cid@example.com", "front three")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := env.TryDo(sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "front-3", Body: body3})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status != http.StatusOK && r.Status != http.StatusConflict {
					t.Errorf("concurrent duplicate: %d %s", r.Status, r.Body)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, k := range []string{"front-1", "front-2", "front-3"} {
			if n := len(listByKey(t, env, env.AdminKey, k)); n != 1 {
				t.Fatalf("key %s: %d sends, want 1", k, n)
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(env.SMTP.Messages()) < 3 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := len(env.SMTP.Messages()); n != 3 {
			t.Fatalf("relay got %d messages, want 3", n)
		}
	})
}
