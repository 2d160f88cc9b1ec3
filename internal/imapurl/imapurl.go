// Package imapurl reads a connected mailbox's imap URL
// (imaps://user:pass@host:993, imap://…?tls=starttls|none, with optional
// inbox= and sent= folder names), shows it without its password, and
// seals it for storage. It is a leaf: the app validates with it, the
// syncer dials with it.
package imapurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/seal"
)

// TLS says how a connection is secured.
type TLS string

const (
	TLSImplicit TLS = "tls"      // imaps://: TLS from the first byte
	TLSStartTLS TLS = "starttls" // imap:// (the default): STARTTLS, required
	TLSNone     TLS = "none"     // imap://…?tls=none: plain text (loopback tests, trusted networks)
)

// MaxLen bounds an imap URL.
const MaxLen = 2048

// Config is a parsed imap URL.
type Config struct {
	Host     string // a name or an address literal, without brackets
	Port     int
	User     string
	Password string
	TLS      TLS
	// Inbox is the folder synced (default "INBOX"); Sent the folder sends
	// are filed in ("" finds it: SPECIAL-USE \Sent, else "Sent").
	Inbox, Sent string
}

// Addr is "host:port".
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// Parse reads an imap URL. Its errors say what is wrong without repeating
// the URL (which holds a password).
func Parse(raw string) (Config, error) {
	if len(raw) > MaxLen {
		return Config{}, fmt.Errorf("longer than %d bytes", MaxLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, errors.New("not a URL")
	}
	c := Config{Host: u.Hostname(), Inbox: "INBOX"}
	switch u.Scheme {
	case "imaps":
		c.TLS, c.Port = TLSImplicit, 993
	case "imap":
		c.TLS, c.Port = TLSStartTLS, 143
	default:
		return Config{}, errors.New("the scheme must be imaps or imap")
	}
	if c.Host == "" || strings.ContainsAny(c.Host, " \r\n") {
		return Config{}, errors.New("the URL names no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Config{}, errors.New("the port must be 1 to 65535")
		}
		c.Port = n
	}
	if u.User == nil || u.User.Username() == "" {
		return Config{}, errors.New("the URL needs user:password@")
	}
	c.User = u.User.Username()
	c.Password, _ = u.User.Password()
	if c.Password == "" {
		return Config{}, errors.New("the URL needs a password (an app password for Gmail or Microsoft 365)")
	}
	if u.Path != "" && u.Path != "/" {
		return Config{}, errors.New("the URL has no path; name folders with ?inbox= and ?sent=")
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "tls":
			if u.Scheme != "imap" || (v != string(TLSStartTLS) && v != string(TLSNone)) {
				return Config{}, errors.New("tls is starttls or none, on imap:// only")
			}
			c.TLS = TLS(v)
		case "inbox", "sent":
			if v == "" || len(v) > 255 || strings.ContainsAny(v, "\r\n\x00*%") {
				return Config{}, fmt.Errorf("%s must name a folder", k)
			}
			if k == "inbox" {
				c.Inbox = v
			} else {
				c.Sent = v
			}
		default:
			return Config{}, fmt.Errorf("unknown parameter %q (tls, inbox, sent)", k)
		}
	}
	return c, nil
}

// Redacted is the URL without its password: what may be shown back.
func (c Config) Redacted() string {
	u := url.URL{Scheme: "imap", Host: c.Addr(), User: url.User(c.User)}
	q := url.Values{}
	switch c.TLS {
	case TLSImplicit:
		u.Scheme = "imaps"
	case TLSNone:
		q.Set("tls", "none")
	}
	if c.Inbox != "" && c.Inbox != "INBOX" {
		q.Set("inbox", c.Inbox)
	}
	if c.Sent != "" {
		q.Set("sent", c.Sent)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ErrSecretKey says a sealed URL cannot be opened: no SENDONCE_SECRET_KEY,
// or another one than it was sealed with.
var ErrSecretKey = errors.New("imapurl: the imap URL is sealed and SENDONCE_SECRET_KEY does not open it")

var field = seal.Field{Name: "imapurl", Info: "sendonce mailbox imap url v1", ErrKey: ErrSecretKey}

// Seal returns the stored form of an imap URL: sealed under secretKey (as
// DKIM keys and webhook secrets are), or the URL itself when secretKey is
// empty (the database must then be protected like the password).
func Seal(raw, secretKey string) ([]byte, error) { return field.Seal(raw, secretKey) }

// Open returns the imap URL from its stored form.
func Open(stored []byte, secretKey string) (string, error) { return field.Open(stored, secretKey) }
