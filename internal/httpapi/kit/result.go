package kit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Result is what an idempotent POST answered, typed: the response is
// written from it, and the audit log and the metrics record it as it is,
// without reading the response back.
type Result struct {
	status      int
	contentType string // "" is application/json
	body        []byte
	// outcome is the key's: Proceed when the handler ran (with or without
	// a key), Replay, InUse or Mismatch; 0 when the request was refused
	// before (a bad key, body or intent).
	outcome idempotency.Outcome
	// idemKey is the request's Idempotency-Key, "" when it had none (or
	// an invalid one).
	idemKey string
	// stored: the answer committed (with its key, when there is one).
	stored bool
	// sendIDs are the sends the answer names (created, or replayed).
	sendIDs []string
	// code and message of an error answer.
	code, message string
	// retryAfter is sent as Retry-After (409 in use, 429 past a cap).
	retryAfter time.Duration
}

func (res Result) response() idempotency.Response {
	return idempotency.Response{Status: res.status, ContentType: "application/json", Body: res.body}
}

// refusal is the result of an error, in the route's error style.
func (s *Base) refusal(r *http.Request, o PostOpts, err error) Result {
	status, v := o.style()(r, s.Logger, err)
	res := Result{status: status, body: Marshal(v)}
	var ce *core.Error
	if errors.As(err, &ce) && ce.Code != core.CodeInternal {
		res.code, res.message, res.retryAfter = ce.Code, ce.Message, ce.RetryAfter
	} else if status >= 500 {
		res.code = core.CodeInternal
	}
	return res
}

// decided is the result of a key the engine answered without running the
// handler.
func (s *Base) decided(r *http.Request, o PostOpts, d idempotency.Decision) Result {
	var res Result
	switch d.Outcome {
	case idempotency.Replay:
		// Its send ids and error code are read from the bytes only when
		// the audit log wants them (withAnswer): parsing every replay cost
		// a tenth of a retry storm's CPU.
		body, err := s.openStored(d.Response.Body)
		if err != nil {
			return s.refusal(r, o, err)
		}
		res = Result{status: d.Response.Status, contentType: d.Response.ContentType, body: body}
	case idempotency.InUse:
		res = s.refusal(r, o, ApiError(CodeKeyInUse, "Idempotency-Key",
			"a request with this Idempotency-Key is still being processed; retry after a second"))
		res.retryAfter = time.Second
	case idempotency.Mismatch:
		res = s.refusal(r, o, ApiError(CodeKeyReused, "Idempotency-Key",
			"this Idempotency-Key was already used with a different request body"))
	default:
		return s.refusal(r, o, errors.New("idempotency: unexpected outcome "+d.Outcome.String()))
	}
	res.outcome = d.Outcome
	return res
}

// respond writes res.
func (s *Base) respond(w http.ResponseWriter, res Result) {
	if res.outcome == idempotency.Replay {
		w.Header().Set(idempotency.ReplayedHeader, "true")
	}
	if res.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((res.retryAfter+time.Second-1)/time.Second)))
	}
	ct := res.contentType
	if ct == "" {
		ct = "application/json"
	}
	WriteRaw(w, res.status, ct, res.body)
}

// observe counts res in the metrics.
func (s *Base) observe(o PostOpts, res Result) {
	switch res.outcome {
	case idempotency.Replay:
		if s.Metrics != nil {
			s.Metrics.IdempotentReplays.Inc()
		}
		s.duplicate(o, metrics.ViaReplay)
	case idempotency.InUse:
		s.conflict("in_use")
		s.duplicate(o, metrics.ViaConflict)
	case idempotency.Mismatch:
		s.conflict("reused")
	case idempotency.Proceed:
		if res.stored && res.status >= 200 && res.status < 300 && o.Committed != nil {
			o.Committed()
		}
	}
}

// duplicate counts a send request that sent nothing new; o.audit marks the
// send routes (a replayed approve is no duplicate email).
func (s *Base) duplicate(o PostOpts, via string) {
	if s.Metrics != nil && o.Audit {
		s.Metrics.DuplicatePrevented(via)
	}
}

func (s *Base) conflict(reason string) {
	if s.Metrics != nil {
		s.Metrics.IdempotencyConflict(reason)
	}
}

// Sender is a response value that names the sends it created.
type Sender interface{ CreatedSendIDs() []string }

func sendIDsOf(v any) []string {
	if s, ok := v.(Sender); ok {
		return s.CreatedSendIDs()
	}
	return nil
}

func (v *SendView) CreatedSendIDs() []string { return []string{v.ID} }

// withAnswer fills a replay's send ids and error from its stored bytes.
func (res Result) withAnswer() Result {
	if res.outcome == idempotency.Replay {
		res.sendIDs, res.code, res.message = readAnswer(res.body)
	}
	return res
}

// readAnswer reads the send ids, or the error, of a stored answer: a
// replay has no typed value, only the bytes it replays. Every route's
// answer has one of these shapes: {"id"}, {"data":[{"id"}]}, or an error
// (native {"error":{…}} or Resend's {"name","message"}).
func readAnswer(body []byte) (ids []string, code, message string) {
	var a struct {
		ID   string `json:"id"`
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Name    string `json:"name"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &a) != nil {
		return nil, "", ""
	}
	switch {
	case a.Error != nil:
		return nil, a.Error.Code, a.Error.Message
	case a.Name != "":
		return nil, a.Name, a.Message
	case a.ID != "":
		return []string{a.ID}, "", ""
	}
	for _, d := range a.Data {
		ids = append(ids, d.ID)
	}
	return ids, "", ""
}
