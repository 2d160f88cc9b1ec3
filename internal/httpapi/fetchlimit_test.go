package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/holdtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// withPath is a send whose one attachment is fetched from url.
func withPath(url string) map[string]any {
	body := sendoncetest.Mail("ann@example.com", "by path")
	body["attachments"] = []map[string]any{{"filename": "f.bin", "path": url}}
	return body
}

// TestAttachmentFetch_ConcurrentDownloadsCapped: however many sends name
// a URL at once, one process downloads at most app.MaxConcurrentFetches
// of them at a time; the others wait for a slot and then go through.
func TestAttachmentFetch_ConcurrentDownloadsCapped(t *testing.T) {
	files := holdtest.Start(t, 10*time.Second, []byte("file"))
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, AttachmentFetch: true})

	const sends = app.MaxConcurrentFetches + 3
	answers := make(chan *sendoncetest.Response, sends)
	var wg sync.WaitGroup
	for i := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := env.TryDo(sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: fmt.Sprint("fetch-", i), Body: withPath(files.URL + "/f")})
			if err != nil {
				t.Errorf("send %d: %v", i, err)
			}
			answers <- r
		}()
	}
	if got := files.PeakAfter(app.MaxConcurrentFetches, 10*time.Second, 500*time.Millisecond); got != app.MaxConcurrentFetches {
		t.Errorf("%d downloads at once, want %d", got, app.MaxConcurrentFetches)
	}
	files.Release()
	wg.Wait()
	close(answers)
	for r := range answers {
		if r != nil && r.Status != http.StatusOK {
			t.Errorf("send: %d %s", r.Status, r.Body)
		}
	}
}

// TestAttachmentFetch_CountsInFlight: a small send's download is charged
// against --max-inflight-bytes as its bytes arrive: while a large request
// holds most of the bound, a send fetching 1 MiB is answered 503
// service_unavailable (a plain small send still goes through), and once
// room is free it is accepted.
func TestAttachmentFetch_CountsInFlight(t *testing.T) {
	data := make([]byte, 1<<20)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(data) }))
	defer files.Close()
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, AttachmentFetch: true, MaxInflightBytes: 2 << 20, InflightWait: 300 * time.Millisecond})
	release := holdLargeRequest(t, env)
	defer release()

	r := env.Send(t, "fetch", withPath(files.URL+"/f"))
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != core.CodeUnavailable {
		t.Fatalf("send fetching 1 MiB while the bound is held: %d %s, want 503 %s", r.Status, r.Body, core.CodeUnavailable)
	}
	if small := env.Send(t, "small", sendoncetest.Mail("ann@example.com", "small")); small.Status != http.StatusOK {
		t.Fatalf("a plain small send waited: %d %s", small.Status, small.Body)
	}
	release()
	if r := env.Send(t, "fetch", withPath(files.URL+"/f")); r.Status != http.StatusOK {
		t.Fatalf("send fetching 1 MiB once room was free: %d %s", r.Status, r.Body)
	}
}
