package delivery_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// testdata/before-lean.db was made by sendonce as it was before the send
// rows became their own delivery jobs: a key (fixtureKey), one send
// delivered (key fixture-sent), two accepted by `serve --role api` and still
// queued, each with a River job waiting.
const fixtureKey = "so_b4qciv3vo3mbuhzz_hx5pugjnih5q2c2zjehvbns3yvc7adgtlxzu4tutqo47ahjfxw5a"

// A database made before the lean write path opens and keeps everything:
// its key authenticates, its sent send keeps its history, a retry of its
// first request replays the stored answer, and the sends it had queued are
// delivered once each, by the claims, with their old jobs gone.
func TestMigrate_DatabaseFromBeforeTheLeanPathKeepsItsSends(t *testing.T) {
	raw, err := os.ReadFile("testdata/before-lean.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	rebaseFixtureTimes(t, path, time.Now())
	env := sendoncetest.Start(t, sendoncetest.Options{DBPath: path, SMTP: true, RetryBase: retryBase})

	list := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/sends?idempotency_key=fixture-sent", Key: fixtureKey})
	if list.Status != http.StatusOK {
		t.Fatalf("the old key: %d %s", list.Status, list.Body)
	}
	data := list.JSON(t)["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("%d sends for fixture-sent, want 1", len(data))
	}
	sent := data[0].(map[string]any)
	s := getSend(t, env, sent["id"].(string))
	if st := str(s, "status"); st != string(core.StatusSent) {
		t.Fatalf("the delivered send is %s", st)
	}
	if ev := eventTypes(s); !slices.Equal(ev[:1], []string{"accepted"}) || !slices.Contains(ev, "sent") {
		t.Errorf("the delivered send's history %v, want accepted … sent", ev)
	}

	body := []byte(`{"to":"ada@example.com","subject":"Delivered before","text":"one"}`)
	replay := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/send", Key: fixtureKey, IdemKey: "fixture-sent", Body: body})
	if replay.Status != http.StatusOK || replay.Header.Get("Idempotent-Replayed") != "true" || !bytes.Contains(replay.Body, []byte(sent["id"].(string))) {
		t.Fatalf("retry of the old first request: %d %v %s, want its replay", replay.Status, replay.Header, replay.Body)
	}

	for _, k := range []string{"fixture-queued-1", "fixture-queued-2"} {
		r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/sends?idempotency_key=" + k, Key: fixtureKey})
		id := r.JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)
		env.WaitStatus(t, id, waitLong, core.StatusSent)
	}
	requireDelivered := env.SMTP.MessageIDCounts()
	if len(requireDelivered) != 2 {
		t.Errorf("relay got %v, want the two queued sends once each", requireDelivered)
	}
	for id, n := range requireDelivered {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM river_job WHERE kind = 'sendonce.deliver'`); n != 0 {
		t.Errorf("%d old delivery jobs left", n)
	}
}
