package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/mail"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Beside the routes' own handlers: attachments, scheduled sends (PATCH and
// cancel), and the bound on the request bytes being worked on at once.

// Defaults of the request limits (--max-request-size, --max-inflight-bytes).
const (
	DefaultMaxRequestBytes = 40 << 20 // the send routes
	DefaultMaxBodyBytes    = 1 << 20  // every other route
	// DefaultMaxInflightBytes bounds the bodies of large send requests
	// being read, decoded and stored at one time: each holds a few times
	// its size while it runs, so this bounds the server's memory.
	DefaultMaxInflightBytes = 96 << 20
	// DefaultInflightWait is how long a large request waits for room
	// before it is answered 503 with Retry-After.
	DefaultInflightWait = 30 * time.Second
	// smallRequest is the size below which a request does not count
	// against the bound: ordinary sends never wait.
	smallRequest = 1 << 20
)

// attachmentJSON is one attachment as every send route spells it.
type attachmentJSON struct {
	Filename    string        `json:"filename"`
	Content     base64Content `json:"content"`
	ContentType string        `json:"content_type"`
	ContentID   string        `json:"content_id"`
	Path        string        `json:"path"`
}

// base64Content is an attachment's content, decoded from base64 straight
// out of the request's bytes: a 10 MiB file is not first copied into a
// 13.4 MiB string. Bad base64 is kept as bad (app reports it with the
// field's name).
type base64Content struct {
	data []byte
	bad  bool
	set  bool
}

func (c *base64Content) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*c = base64Content{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' {
		return &json.UnmarshalTypeError{Value: jsonValueKind(b), Type: stringType}
	}
	raw := b[1 : len(b)-1]
	if bytes.IndexByte(raw, '\\') >= 0 { // escapes (\/, \n): decode the string first
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		raw = []byte(s)
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Decode(data, raw)
	*c = base64Content{data: data[:n], bad: err != nil, set: true}
	return nil
}

var stringType = reflect.TypeFor[string]()

func appAttachments(in []attachmentJSON) []app.AttachmentRequest {
	if len(in) == 0 {
		return nil
	}
	out := make([]app.AttachmentRequest, len(in))
	for i, a := range in {
		out[i] = app.AttachmentRequest{Filename: a.Filename, Data: a.Content.data, HasContent: a.Content.set,
			BadContent: a.Content.bad, ContentType: a.ContentType, ContentID: a.ContentID, Path: a.Path}
	}
	return out
}

// inflight bounds the bytes of large requests in progress.
type inflight struct {
	sem   *semaphore.Weighted
	limit int64
}

func newInflight(limit int64) *inflight {
	return &inflight{sem: semaphore.NewWeighted(limit), limit: limit}
}

// bounded holds room for the request's declared size (the route's limit
// when it declares none) while next runs; with no room within
// inflightWait it answers 503 service_unavailable with Retry-After.
func (s *Server) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > s.cfg.MaxRequestBytes {
			n = s.cfg.MaxRequestBytes
		}
		if n < smallRequest {
			next.ServeHTTP(w, r)
			return
		}
		n = min(n, s.inflight.limit)
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.InflightWait)
		err := s.inflight.sem.Acquire(ctx, n)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.cfg.InflightWait/time.Second))))
			writeStyled(w, r, s, core.Errorf(core.CodeUnavailable, "", "too many large requests are being processed; retry after Retry-After"))
			return
		}
		defer s.inflight.sem.Release(n)
		next.ServeHTTP(w, r)
	})
}

// writeStyled writes err in the error shape of the route's style.
func writeStyled(w http.ResponseWriter, r *http.Request, s *Server, err error) {
	if isResendPath(r.URL.Path) {
		writeResendError(w, r, s.logger, err)
		return
	}
	writeError(w, r, s.logger, err)
}

func isResendPath(p string) bool { return len(p) >= 7 && p[:7] == "/emails" }

func (s *Server) handleCancel(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.svc.Cancel(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewSend(send), nil
}

// scheduleRequest is the body of PATCH /v1/sends/{id} and PATCH
// /emails/{id}.
type scheduleRequest struct {
	ScheduledAt string `json:"scheduled_at"`
}

func (s *Server) handleReschedule(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req scheduleRequest
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	send, err := s.svc.Reschedule(ctx, tx, key.Tenant, r.PathValue("id"), req.ScheduledAt)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewSend(send), nil
}

// resendEmailRef is Resend's answer to an update or a cancel.
type resendEmailRef struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

func (s *Server) handleResendUpdate(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req scheduleRequest
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	send, err := s.svc.Reschedule(ctx, tx, key.Tenant, r.PathValue("id"), req.ScheduledAt)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resendEmailRef{Object: "email", ID: send.ID}, nil
}

func (s *Server) handleResendCancel(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.svc.Cancel(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resendEmailRef{Object: "email", ID: send.ID}, nil
}

// handleResendList is GET /emails: newest first, after or before an id.
func (s *Server) handleResendList(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	f := core.SendFilter{Limit: limit, After: q.Get("after"), Before: q.Get("before")}
	if f.After != "" && f.Before != "" {
		writeResendError(w, r, s.logger, core.Errorf(core.CodeValidation, "after", "give after or before, not both"))
		return
	}
	if key.Agent {
		f.APIKeyID = key.ID
	}
	sends, next, err := s.reads.ListSends(r.Context(), key.Tenant, f)
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	out := resendList[resendEmailView]{Object: "list", HasMore: next != "", Data: make([]resendEmailView, 0, len(sends))}
	for _, sd := range sends {
		out.Data = append(out.Data, viewResendEmail(sd))
	}
	writeJSON(w, http.StatusOK, out)
}

// resendOpts gives o Resend's key length and error body.
func (s *Server) resendOpts(o postOpts) postOpts {
	o.maxKeyLen, o.errs = resendMaxKeyLen, resendErrors
	return o
}

// listFilters reads GET /v1/sends' recipient, tag (name:value) and
// created_after and created_before (RFC 3339) into f.
func listFilters(q url.Values, f *core.SendFilter) error {
	if v := q.Get("recipient"); v != "" {
		addr, err := recipientParam(v)
		if err != nil {
			return err
		}
		f.Recipient = addr
	}
	if tag := q.Get("tag"); tag != "" {
		name, value, ok := strings.Cut(tag, ":")
		if !ok || name == "" {
			return core.Errorf(core.CodeValidation, "tag", "tag must be name:value")
		}
		f.TagName, f.TagValue = name, value
	}
	for _, b := range []struct {
		param string
		dst   *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		if v := q.Get(b.param); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return core.Errorf(core.CodeValidation, b.param, "%s must be an RFC 3339 time with an offset", b.param)
			}
			*b.dst = t
		}
	}
	return nil
}

// recipientParam is the address GET /v1/sends?recipient= looks up, as
// the recipient index keeps it: bare and lower case ("Ada <Ada@x.org>"
// finds what ada@x.org does).
func recipientParam(v string) (string, error) {
	if strings.ContainsAny(v, "\r\n") {
		return "", core.Errorf(core.CodeValidation, "recipient", "recipient must not contain CR or LF")
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		return "", core.Errorf(core.CodeValidation, "recipient", "recipient must be an email address")
	}
	return core.NormalizeAddress(a.Address), nil
}

// largeJSON is the body size from which decodeStrict avoids json.Decoder,
// which copies the whole body into a buffer it grows by doubling (23 MB
// allocated for a 14 MB send, measured with the heap profile of 16
// concurrent 10 MiB sends).
const largeJSON = 1 << 20

// decodeLarge is decodeStrict for a large body: the strict decoder runs on
// a copy whose long string values are emptied (a few kilobytes), which
// finds unknown fields, type errors and trailing data as it would on the
// whole; then json.Unmarshal, which reads the body in place, decodes it.
func decodeLarge(body []byte, v any) error {
	blank := reflect.New(reflect.TypeOf(v).Elem()).Interface()
	dec := json.NewDecoder(bytes.NewReader(blankLongStrings(body)))
	dec.DisallowUnknownFields()
	if err := decodeError(dec, dec.Decode(blank)); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return decodeError(json.NewDecoder(bytes.NewReader(nil)), err)
	}
	return nil
}

// blankLongStrings returns body with every string value of 4 KiB or more
// (not a member name) replaced by "".
func blankLongStrings(body []byte) []byte {
	out := make([]byte, 0, 64<<10)
	last := 0
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		end := stringEnd(body, i+1)
		if end < 0 {
			break // unterminated: the strict decoder reports it
		}
		next := end + 1
		for next < len(body) && (body[next] == ' ' || body[next] == '\t' || body[next] == '\r' || body[next] == '\n') {
			next++
		}
		if end-i > 4<<10 && (next >= len(body) || body[next] != ':') {
			out = append(out, body[last:i]...)
			out = append(out, '"', '"')
			last = end + 1
		}
		i = end
	}
	return append(out, body[last:]...)
}

// stringEnd returns the index of the quote that closes the JSON string
// starting at i, or -1. It jumps from quote to quote with IndexByte: a
// 13 MiB base64 value has none inside it.
func stringEnd(body []byte, i int) int {
	for i < len(body) {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		n := 0 // backslashes right before the quote: an odd number escapes it
		for j := q - 1; j >= i && body[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
	return -1
}
