package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// baselineHandler is the yardstick of docs/performance.md: bare net/http
// decoding a JSON POST and answering JSON, nothing stored. sendonce's
// figures are quoted as a share of it, measured the same way in the same
// run.
func baselineHandler() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var v map[string]any
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(body, &v)
		}
		if err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"snd_`+strconv.FormatInt(n.Add(1), 10)+`","status":"queued"}`)
	})
}

// serveBaseline serves baselineHandler on addr until ctx ends.
func serveBaseline(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	srv := &http.Server{Handler: baselineHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "baseline net/http JSON server on http://%s (Ctrl-C stops it)\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
