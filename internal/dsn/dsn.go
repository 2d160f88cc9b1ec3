// Package dsn reads the two kinds of reports that come back for mail
// already handed off: delivery status notifications (RFC 3464, with the
// enhanced status codes of RFC 3463) and feedback reports (ARF, RFC 5965).
//
// The MIME walk is github.com/emersion/go-message's; the report fields
// themselves are header blocks, read with net/textproto. Why not an existing
// DSN parser: see docs/deliverability.md.
package dsn

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/mail"
	nettp "net/textproto"
	"regexp"
	"strings"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"
)

// Kinds of report.
const (
	KindDSN = "delivery-status"
	KindARF = "feedback-report"
)

// Limits on what one report may hold; mail beyond them is not a report we
// use (the SMTP listener bounds the message's size).
const (
	maxParts      = 64
	maxRecipients = 1000
	maxPartBytes  = 1 << 20
)

// ErrNotReport says the mail is not a DSN or a feedback report.
var ErrNotReport = errors.New("dsn: not a delivery status notification or feedback report")

// Report is what one report says.
type Report struct {
	Kind string
	// Digest identifies the report by its machine-readable part: the same
	// report received twice has the same digest.
	Digest string
	// OriginalMessageID is the Message-ID (with brackets) of the message
	// the report is about, from its returned headers; "" when none came.
	OriginalMessageID string
	// OriginalEnvelopeID is the DSN's Original-Envelope-Id, "" for none.
	OriginalEnvelopeID string
	ReportingMTA       string
	// Recipients are a DSN's per-recipient blocks.
	Recipients []Recipient
	// Feedback is a feedback report's fields; nil for a DSN.
	Feedback *Feedback

	origTo []string
}

// Recipient is one per-recipient block of a DSN.
type Recipient struct {
	FinalRecipient    string // the address, without its "rfc822;" type
	OriginalRecipient string
	Action            string // lower case: failed, delayed, delivered, relayed, expanded
	Status            string // enhanced status code, e.g. "5.1.1"; "" when it had none that parses
	DiagnosticCode    string // e.g. "smtp; 550 5.1.1 no such user"
	RemoteMTA         string
}

// Feedback is the fields of a feedback report.
type Feedback struct {
	Type             string // lower case: abuse, fraud, virus, other, not-spam, …
	UserAgent        string
	OriginalMailFrom string
	OriginalRcptTo   []string
	// OriginalTo are the To addresses of the returned message's headers.
	OriginalTo []string
}

var blankLine = regexp.MustCompile(`\n[ \t]*\n`)

var statusRE = regexp.MustCompile(`\b([245])\.(\d{1,3})\.(\d{1,3})\b`)

// Parse reads one message and returns its report; ErrNotReport when it
// holds none, another error when it is broken.
func Parse(r io.Reader) (*Report, error) {
	e, err := message.Read(r)
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("dsn: read message: %w", err)
	}
	mr := e.MultipartReader()
	if mr == nil {
		return nil, ErrNotReport
	}
	rep := &Report{}
	var machine []byte
	for i := 0; ; i++ {
		if i >= maxParts {
			return nil, fmt.Errorf("dsn: more than %d parts", maxParts)
		}
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
			return nil, fmt.Errorf("dsn: read part: %w", err)
		}
		ct, _, _ := p.Header.ContentType()
		body, err := io.ReadAll(io.LimitReader(p.Body, maxPartBytes+1))
		if err != nil {
			return nil, fmt.Errorf("dsn: read part: %w", err)
		}
		if len(body) > maxPartBytes {
			return nil, fmt.Errorf("dsn: a part over %d bytes", maxPartBytes)
		}
		switch strings.ToLower(ct) {
		case "message/delivery-status", "message/global-delivery-status":
			if rep.Kind != "" {
				return nil, errors.New("dsn: more than one report part")
			}
			rep.Kind, machine = KindDSN, body
			if err := rep.readDSN(body); err != nil {
				return nil, err
			}
		case "message/feedback-report":
			if rep.Kind != "" {
				return nil, errors.New("dsn: more than one report part")
			}
			rep.Kind, machine = KindARF, body
			if err := rep.readARF(body); err != nil {
				return nil, err
			}
		case "message/rfc822", "text/rfc822-headers", "message/rfc822-headers", "message/global", "message/global-headers":
			rep.readOriginal(body)
		}
	}
	if rep.Kind == "" {
		return nil, ErrNotReport
	}
	if rep.Feedback != nil {
		rep.Feedback.OriginalTo = rep.origTo
	}
	rep.Digest = digest(rep.Kind, machine)
	return rep, nil
}

// digest hashes the machine-readable part with its line ends and
// surrounding space normalized, so a relay that rewrapped the mail's
// transport does not make a second report of it.
func digest(kind string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(kind + "\x00"))
	for _, line := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			h.Write([]byte(line + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// blocks splits a report body into its header blocks (RFC 3464 section 2.1:
// groups of fields separated by blank lines).
func blocks(body []byte) ([]nettp.MIMEHeader, error) {
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	var out []nettp.MIMEHeader
	for _, chunk := range blankLine.Split(string(body), -1) {
		chunk = strings.Trim(chunk, "\n")
		if strings.TrimSpace(chunk) == "" {
			continue
		}
		r := nettp.NewReader(bufio.NewReader(strings.NewReader(chunk + "\n\n")))
		h, err := r.ReadMIMEHeader()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("dsn: report fields: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// typed strips an "rfc822;" (or "utf-8;") address type.
func typed(v string) string {
	if _, rest, ok := strings.Cut(v, ";"); ok {
		v = rest
	}
	return strings.Trim(strings.TrimSpace(v), "<>")
}

func (rep *Report) readDSN(body []byte) error {
	bs, err := blocks(body)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		return errors.New("dsn: empty delivery-status part")
	}
	msg := bs[0]
	rep.ReportingMTA = typed(msg.Get("Reporting-Mta"))
	rep.OriginalEnvelopeID = strings.TrimSpace(msg.Get("Original-Envelope-Id"))
	for _, b := range bs[1:] {
		if len(rep.Recipients) == maxRecipients {
			return fmt.Errorf("dsn: more than %d recipients", maxRecipients)
		}
		r := Recipient{
			FinalRecipient:    typed(b.Get("Final-Recipient")),
			OriginalRecipient: typed(b.Get("Original-Recipient")),
			Action:            strings.ToLower(strings.TrimSpace(b.Get("Action"))),
			DiagnosticCode:    strings.Join(strings.Fields(b.Get("Diagnostic-Code")), " "),
			RemoteMTA:         typed(b.Get("Remote-Mta")),
		}
		if m := statusRE.FindString(b.Get("Status")); m != "" {
			r.Status = m
		} else if m := statusRE.FindString(r.DiagnosticCode); m != "" {
			r.Status = m // some MTAs put the code only in the diagnostic
		}
		if r.FinalRecipient == "" && r.OriginalRecipient == "" {
			continue // a block naming nobody tells us nothing
		}
		rep.Recipients = append(rep.Recipients, r)
	}
	if len(rep.Recipients) == 0 {
		return errors.New("dsn: no per-recipient fields")
	}
	return nil
}

func (rep *Report) readARF(body []byte) error {
	bs, err := blocks(body)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		return errors.New("dsn: empty feedback-report part")
	}
	h := bs[0]
	f := &Feedback{
		Type:             strings.ToLower(strings.TrimSpace(h.Get("Feedback-Type"))),
		UserAgent:        strings.TrimSpace(h.Get("User-Agent")),
		OriginalMailFrom: typed(h.Get("Original-Mail-From")),
	}
	if f.Type == "" {
		return errors.New("dsn: feedback report without Feedback-Type")
	}
	for _, v := range h.Values("Original-Rcpt-To") {
		if a := typed(v); a != "" {
			f.OriginalRcptTo = append(f.OriginalRcptTo, a)
		}
	}
	rep.Feedback = f
	return nil
}

// readOriginal takes the Message-ID and To of the returned message or
// headers; a part that does not parse leaves them empty.
func (rep *Report) readOriginal(body []byte) {
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(append(body, "\r\n\r\n"...))))
	if err != nil && h.Len() == 0 {
		return
	}
	mh := message.Header{Header: h}
	if id := strings.TrimSpace(mh.Get("Message-Id")); id != "" && rep.OriginalMessageID == "" {
		rep.OriginalMessageID = id
	}
	dec := new(mime.WordDecoder)
	to, err := dec.DecodeHeader(mh.Get("To"))
	if err != nil {
		return
	}
	if list, err := mail.ParseAddressList(to); err == nil {
		for _, a := range list {
			rep.origTo = append(rep.origTo, a.Address)
		}
	}
}
