package idempotency

import (
	"bytes"
	"net/http"
	"strconv"
)

// bufferedWriter holds the handler's response until the middleware has
// decided its fate.
type bufferedWriter struct {
	w           http.ResponseWriter
	header      http.Header
	status      int
	body        bytes.Buffer
	limit       int
	overflow    bool // the body went over limit: not stored
	passthrough bool // on overflow, stream to w instead of discarding
	streaming   bool // headers and buffered bytes went to w
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(code int) {
	if b.status != 0 || (code >= 100 && code < 200) {
		return // 1xx is not a final response; a second call is ignored as net/http does
	}
	b.status = code
}

func (b *bufferedWriter) statusCode() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	switch {
	case b.streaming:
		return b.w.Write(p)
	case b.overflow:
		return len(p), nil
	case b.body.Len()+len(p) <= b.limit:
		return b.body.Write(p)
	}
	b.overflow = true
	if !b.passthrough {
		b.body.Reset()
		return len(p), nil
	}
	b.streaming = true
	b.copyHeader()
	b.w.WriteHeader(b.status)
	if _, err := b.w.Write(b.body.Bytes()); err != nil {
		return 0, err
	}
	b.body.Reset()
	return b.w.Write(p)
}

func (b *bufferedWriter) copyHeader() {
	h := b.w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	h.Del(ReplayedHeader) // a first response never carries it
}

// flush sends the buffered response (a no-op once streaming).
func (b *bufferedWriter) flush() {
	if b.streaming {
		return
	}
	b.copyHeader()
	if b.header.Get("Content-Length") == "" {
		b.w.Header().Set("Content-Length", strconv.Itoa(b.body.Len()))
	}
	b.w.WriteHeader(b.statusCode())
	_, _ = b.w.Write(b.body.Bytes())
}
