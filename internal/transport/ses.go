package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// SESKind is the ses kind: Amazon SES v2 SendEmail with raw content.
const SESKind Kind = "ses"

// SESConfig configures the SES transport.
type SESConfig struct {
	Region string
	// AccessKeyID and SecretAccessKey, when set, are the credentials;
	// otherwise the AWS SDK's default chain (environment, shared config,
	// instance role) provides them.
	AccessKeyID, SecretAccessKey string
	// Endpoint overrides the service URL (tests: an SES emulator).
	Endpoint string
	// ConfigurationSet is the configuration set every message is sent
	// with (where its events are published).
	ConfigurationSet string
	// DialContext opens connections (the outbound policy for a tenant's
	// provider); nil dials directly.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// TLSConfig adds trusted roots (tests); nil: the system's.
	TLSConfig *tls.Config
	// Timeout bounds one request; defaults to 30s.
	Timeout time.Duration
}

var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$|^[a-z0-9-]{1,40}$`)

// ParseSESURL parses
// ses://[ACCESS_KEY_ID:SECRET@]REGION[?endpoint=URL&configuration_set=NAME].
// The secret must be URL-encoded (AWS secrets hold '/' and '+'). Errors
// never quote the secret.
func ParseSESURL(s string) (SESConfig, error) {
	var c SESConfig
	const form = "ses://[KEY_ID:SECRET@]REGION"
	u, err := parseProviderURL(s, SESKind, "secret", form)
	if err != nil {
		return c, err
	}
	if u.Port() != "" {
		return c, errors.New("transport: invalid ses URL: want " + form)
	}
	c.Region = u.Hostname()
	if !regionPattern.MatchString(c.Region) {
		return c, errors.New("transport: invalid ses URL: missing or invalid region (ses://us-east-1)")
	}
	if u.User != nil {
		c.AccessKeyID = u.User.Username()
		c.SecretAccessKey, _ = u.User.Password()
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return c, errors.New("transport: invalid ses URL: credentials are ACCESS_KEY_ID:SECRET, both given")
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, errors.New("transport: invalid ses URL query")
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return c, fmt.Errorf("transport: invalid ses URL: %s given more than once", key)
		}
		switch key {
		case "endpoint":
			e, err := url.Parse(vals[0])
			if err != nil || (e.Scheme != "https" && e.Scheme != "http") || e.Host == "" || e.User != nil {
				return c, errors.New("transport: invalid ses URL: endpoint must be an http(s):// URL")
			}
			c.Endpoint = vals[0]
		case "configuration_set":
			if vals[0] == "" || len(vals[0]) > 64 || tagValue(vals[0]) != vals[0] {
				return c, errors.New("transport: invalid ses URL: configuration_set is 1 to 64 letters, digits, '_' or '-'")
			}
			c.ConfigurationSet = vals[0]
		default:
			return c, fmt.Errorf("transport: invalid ses URL: unknown parameter %q", key)
		}
	}
	return c, nil
}

// Redacted is the URL with the secret replaced, fit for logs and the API.
func (c SESConfig) Redacted() string {
	u := url.URL{Scheme: string(SESKind), Host: c.Region}
	if c.AccessKeyID != "" {
		u.User = url.UserPassword(c.AccessKeyID, "xxxxx")
	}
	q := url.Values{}
	if c.Endpoint != "" {
		q.Set("endpoint", c.Endpoint)
	}
	if c.ConfigurationSet != "" {
		q.Set("configuration_set", c.ConfigurationSet)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// SES delivers through Amazon SES v2. It is safe for concurrent use.
//
// The SDK's own retries are off: it retries 5xx answers and broken
// connections, after which SES may hold the message twice. Every outcome
// is classified here instead; SES has no idempotency key, so a request
// that may have been taken is Ambiguous (the send becomes unknown, and an
// SES event settles it).
type SES struct {
	cfg    SESConfig
	http   tracedClient
	once   sync.Once
	client *sesv2.Client
	err    error
}

var _ Provider = (*SES)(nil)

// NewSES returns an SES transport. Credentials from the default chain are
// looked up at the first message.
func NewSES(cfg SESConfig) *SES {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &SES{cfg: cfg, http: tracedClient{newHTTPClient(cfg.DialContext, cfg.TLSConfig)}}
}

// Kind implements Provider.
func (s *SES) Kind() Kind { return SESKind }

// Close drops idle connections.
func (s *SES) Close() error {
	s.http.c.CloseIdleConnections()
	return nil
}

func (s *SES) sesClient(ctx context.Context) (*sesv2.Client, error) {
	s.once.Do(func() {
		var ac aws.Config
		if s.cfg.AccessKeyID != "" {
			ac = aws.Config{Region: s.cfg.Region,
				Credentials: credentials.NewStaticCredentialsProvider(s.cfg.AccessKeyID, s.cfg.SecretAccessKey, "")}
		} else {
			ac, s.err = awsconfig.LoadDefaultConfig(context.WithoutCancel(ctx), awsconfig.WithRegion(s.cfg.Region))
			if s.err != nil {
				s.err = fmt.Errorf("load AWS configuration: %w", s.err)
				return
			}
		}
		s.client = sesv2.NewFromConfig(ac, func(o *sesv2.Options) {
			o.Retryer = aws.NopRetryer{}
			o.HTTPClient = s.http
			if s.cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(s.cfg.Endpoint)
			}
		})
	})
	return s.client, s.err
}

// Deliver implements Transport (no send: no tags).
func (s *SES) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	_, err := s.Submit(ctx, Submission{Env: env, Raw: raw})
	return err
}

// Submit sends the message as raw content to the envelope's recipients,
// tagged with the send id and tenant.
func (s *SES) Submit(ctx context.Context, sub Submission) (Receipt, error) {
	if stage, err := checkEnvelope(Envelope{To: sub.Env.To}); err != nil {
		return Receipt{}, &Error{Class: Permanent, Stage: stage, Err: err}
	}
	c, err := s.sesClient(ctx)
	if err != nil {
		return Receipt{}, &Error{Class: Temporary, Stage: StageRequest, Err: err}
	}
	in := &sesv2.SendEmailInput{
		Content:     &sestypes.EmailContent{Raw: &sestypes.RawMessage{Data: sub.Raw}},
		Destination: &sestypes.Destination{ToAddresses: sub.Env.To},
	}
	if sub.SendID != "" {
		in.EmailTags = append(in.EmailTags, sestypes.MessageTag{Name: aws.String("sendonce_send_id"), Value: aws.String(tagValue(sub.SendID))})
	}
	if sub.Tenant != "" {
		in.EmailTags = append(in.EmailTags, sestypes.MessageTag{Name: aws.String("sendonce_tenant"), Value: aws.String(tagValue(sub.Tenant))})
	}
	if s.cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.cfg.ConfigurationSet)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	rctx, w := withWire(rctx)
	out, err := c.SendEmail(rctx, in)
	if err != nil {
		return Receipt{}, classifySES(err, w)
	}
	if out.MessageId == nil || *out.MessageId == "" {
		return Receipt{}, &Error{Class: Ambiguous, Reached: true, Stage: StageResponse, Err: errors.New("SES answered without a message id")}
	}
	return Receipt{Provider: string(SESKind), MessageID: *out.MessageId}, nil
}

// SES error codes (docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html,
// "Errors", and CommonErrors.html) by what they mean for the message.
var (
	// Not taken, and not about this message: throttling, the account's
	// state or credentials. Retry later, or the next transport.
	sesNotTaken = []string{"TooManyRequestsException", "LimitExceededException", "ThrottlingException", "Throttling",
		"SendingPausedException", "AccountSuspendedException", "NotFoundException",
		"AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "SignatureDoesNotMatch",
		"IncompleteSignature", "MissingAuthenticationToken", "InvalidClientTokenId", "ExpiredTokenException", "RequestExpired"}
	// This message refused for good.
	sesRefused = []string{"MessageRejected", "MailFromDomainNotVerifiedException", "BadRequestException"}
)

// classifySES reads an SDK error: an answer with an error code, or a
// failure with none (then the wire says whether SES can have seen it).
func classifySES(err error, w *wire) *Error {
	var re *smithyhttp.ResponseError
	var ae smithy.APIError
	if !errors.As(err, &re) || re.Response == nil || re.HTTPStatusCode() == 0 {
		return networkError(w, sesCause(err), false)
	}
	status := re.HTTPStatusCode()
	msg := fmt.Sprintf("SES answered %d", status)
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
		msg += " " + code
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + truncate(m, 300)
		}
	}
	e := &Error{Reached: true, Code: status, Stage: StageResponse, Err: errors.New(msg)}
	switch {
	case status == 429 || containsCode(sesNotTaken, code):
		e.Class = Temporary
	case containsCode(sesRefused, code):
		e.Class = Permanent
	case status >= 400 && status < 500:
		e.Class = Permanent // SES answered, and took nothing
	default:
		e.Class = Ambiguous // 5xx (or stranger) without a message id
	}
	return e
}

func containsCode(list []string, code string) bool {
	for _, c := range list {
		if c == code {
			return true
		}
	}
	return false
}

// sesCause is the network error under the SDK's wrapping.
func sesCause(err error) error {
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) && se.Err != nil {
		return scrub(se.Err)
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) && oe.Err != nil {
		return scrub(oe.Err)
	}
	return scrub(err)
}
