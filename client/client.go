package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Config configures a Client. Only BaseURL and APIKey are required; every
// other field says its default.
type Config struct {
	// BaseURL is the server's root, e.g. "http://127.0.0.1:8787".
	// Required.
	BaseURL string
	// APIKey is the bearer secret. Required.
	APIKey string
	// HTTPClient sends the requests. Defaults to a client with its own
	// transport and no overall timeout (Timeout bounds each attempt). Its
	// own Timeout, if set, also applies.
	HTTPClient *http.Client
	// Timeout bounds one attempt, from dialling to the last byte of the
	// response. Defaults to 30 seconds.
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one call, the first included.
	// Defaults to 4; 1 turns retries off.
	MaxAttempts int
	// MaxElapsed bounds the time of one call: no retry starts (and no
	// backoff sleeps) past it. Defaults to 2 minutes. A call may still last
	// up to MaxElapsed plus one Timeout.
	MaxElapsed time.Duration
	// BaseDelay is the backoff before the first retry; retry n waits a
	// random time in [0, min(MaxDelay, BaseDelay·2^(n−1))] ("full jitter"),
	// or the response's Retry-After if that is longer. Defaults to 500ms.
	BaseDelay time.Duration
	// MaxDelay caps the jittered backoff (not Retry-After, which is
	// honoured as long as it fits in MaxElapsed). Defaults to 30 seconds.
	MaxDelay time.Duration
	// UserAgent is sent on every request. Defaults to "sendonce-go".
	UserAgent string

	// Now reads the clock. Defaults to time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done. Defaults to a timer; tests pass
	// one that records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c *Config) setDefaults() {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 4
	}
	if c.MaxElapsed <= 0 {
		c.MaxElapsed = 2 * time.Minute
	}
	if c.BaseDelay <= 0 {
		c.BaseDelay = 500 * time.Millisecond
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 30 * time.Second
	}
	if c.MaxDelay < c.BaseDelay {
		c.MaxDelay = c.BaseDelay
	}
	if c.UserAgent == "" {
		c.UserAgent = "sendonce-go"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
}

func (c *Config) validate() error {
	if c.BaseURL == "" {
		return errors.New("sendonce client: BaseURL is required")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("sendonce client: BaseURL %q is not an http(s) URL", c.BaseURL)
	}
	if c.APIKey == "" {
		return errors.New("sendonce client: APIKey is required")
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Client calls the sendonce API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base string
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// NewIdempotencyKey returns a fresh UUID v4. Make one per logical email,
// store it before the first call, and reuse it on every retry.
func NewIdempotencyKey() string { return uuid.NewString() }

// MaxKeyLen is the longest Idempotency-Key the native API accepts.
const MaxKeyLen = 255

// ValidateIdempotencyKey accepts what the server takes as is: 1 to 255
// bytes of visible ASCII (0x21-0x7E). A leading '"' would make the server
// read a structured-field string and store another key than the one given,
// so that a later look-up by key missed; it is refused. The error wraps
// ErrInvalidRequest.
func ValidateIdempotencyKey(k string) error {
	if k == "" || len(k) > MaxKeyLen {
		return fmt.Errorf("%w: an Idempotency-Key has 1 to %d characters", ErrInvalidRequest, MaxKeyLen)
	}
	if k[0] == '"' {
		return fmt.Errorf("%w: an Idempotency-Key must not start with '\"'", ErrInvalidRequest)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return fmt.Errorf("%w: Idempotency-Key byte %d is not visible ASCII", ErrInvalidRequest, i)
		}
	}
	return nil
}

// keyOrNew is the Idempotency-Key every attempt of a call carries: key,
// checked before anything is sent, or one UUID v4 made for the call when
// key is empty.
func keyOrNew(key string) (string, error) {
	if key == "" {
		return NewIdempotencyKey(), nil
	}
	if err := ValidateIdempotencyKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// idemKey is the caller's key, "" when opts is nil (one made per call).
func (o *SendOptions) idemKey() string {
	if o == nil {
		return ""
	}
	return o.IdempotencyKey
}

// idemKey is the caller's key, "" when opts is nil (one made per call).
func (o *CallOptions) idemKey() string {
	if o == nil {
		return ""
	}
	return o.IdempotencyKey
}

// request is one logical call.
type request struct {
	method string
	path   string // escaped path below the base URL
	query  url.Values
	body   []byte // nil: no body
	key    string // Idempotency-Key, "" for none
}

// get reads a GET of path (with query, nil for none) into a new T: the
// shape of every read and list call but GetSend and ListSends, which keep
// the raw answer too.
func get[T any](ctx context.Context, c *Client, path string, query url.Values) (*T, error) {
	v, _, err := callFor[T](ctx, c, request{method: http.MethodGet, path: path, query: query})
	return v, err
}

// callFor runs r (call) and decodes its answer into a new T; resp is the
// answer, for the calls that read its status.
func callFor[T any](ctx context.Context, c *Client, r request) (*T, *response, error) {
	var v T
	resp, err := c.call(ctx, r, &v)
	if err != nil {
		return nil, nil, err
	}
	return &v, resp, nil
}

// callWith runs a call of method (PATCH, PUT) on path with p's JSON body
// (jsonBody) and decodes its answer into a new T, as callFor.
func callWith[T, P any](ctx context.Context, c *Client, method, path string, p *P) (*T, *response, error) {
	body, err := jsonBody(p)
	if err != nil {
		return nil, nil, err
	}
	return callFor[T](ctx, c, request{method: method, path: path, body: body})
}

// jsonBody is the JSON body of a call's parameters p, or
// ErrInvalidRequest when there are none (nil) or they do not marshal: the
// one check every call taking a parameter struct makes before sending.
func jsonBody[T any](p *T) ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil %s", ErrInvalidRequest, reflect.TypeFor[T]().Name())
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	return body, nil
}

// idPath is the path of one thing of a collection (prefix ends in "/"),
// its id escaped, then suffix; an empty id is ErrInvalidRequest naming
// what it is, never a request for the collection itself.
func idPath(prefix, what, id, suffix string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty %s", ErrInvalidRequest, what)
	}
	return prefix + url.PathEscape(id) + suffix, nil
}

// response is a 2xx answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// maxResponseBytes bounds what one response may make the client read.
const maxResponseBytes = 16 << 20

// do runs r with retries. Every attempt is the same request: same body,
// same key.
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	start := c.cfg.Now()
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, r)
		if err == nil {
			return resp, nil
		}
		fail := func(err error) error {
			return &CallError{Method: r.method, Path: r.path, IdempotencyKey: r.key, Attempts: attempt, Err: err}
		}
		if ctx.Err() != nil {
			return nil, fail(fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err))
		}
		if !IsRetryable(err) || attempt >= c.cfg.MaxAttempts {
			return nil, fail(err)
		}
		wait := c.backoff(attempt)
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > wait {
			wait = e.RetryAfter
		}
		now := c.cfg.Now()
		if now.Add(wait).Sub(start) > c.cfg.MaxElapsed {
			return nil, fail(err)
		}
		if dl, ok := ctx.Deadline(); ok && now.Add(wait).After(dl) {
			return nil, fail(err)
		}
		if serr := c.cfg.Sleep(ctx, wait); serr != nil {
			return nil, fail(fmt.Errorf("%w (last attempt: %w)", serr, err))
		}
	}
}

// backoff is full jitter: uniform in [0, min(MaxDelay, BaseDelay·2^(n−1))].
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.MaxDelay
	if n-1 < 32 {
		if e := c.cfg.BaseDelay << (n - 1); e > 0 && e < d {
			d = e
		}
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// attempt sends r once within Timeout and reads the whole answer.
func (c *Client) attempt(ctx context.Context, r request) (*response, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(actx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
	}
	return nil, apiError(resp, b, c.cfg.Now())
}

func apiError(resp *http.Response, body []byte, now time.Time) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now)}
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.Param = eb.Error.Code, eb.Error.Message, eb.Error.Param
		return e
	}
	e.Code = CodeHTTP
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(body)); s != "" && len(s) <= 200 {
		e.Message += ": " + s
	}
	return e
}

// retryAfter reads delay-seconds or an HTTP-date; zero when absent or bad.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func decode(resp *response, v any) error {
	if err := json.Unmarshal(resp.body, v); err != nil {
		return &decodeError{err: err}
	}
	return nil
}
