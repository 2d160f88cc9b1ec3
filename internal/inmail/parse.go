// Package inmail reads received mail: a bounded MIME parse into the fields
// a received message shows (parse.go), and the receiving side's
// SPF, DKIM and DMARC checks (auth.go).
package inmail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets mail uses, not only UTF-8

	"github.com/sendonce/sendonce/internal/core"
)

// Bounds of a parse: a stranger chooses the message, so its nesting, its
// part count and the text kept of it are bounded; the bytes themselves
// are bounded by the listener's message size.
const (
	MaxDepth     = 16
	MaxParts     = 256
	MaxBodyBytes = 4 << 20 // text and HTML each
)

// ErrTooComplex is a message past MaxDepth or MaxParts.
var ErrTooComplex = errors.New("the message nests too deep or has too many parts")

// Parsed is the view of a received message.
type Parsed struct {
	MessageID, InReplyTo string
	References           []string
	From                 string
	To, Cc, ReplyTo      []string
	Subject              string
	Date                 *time.Time
	Text, HTML           string
	Headers              []core.Header
	Attachments          []core.ReceivedAttachment
}

// Parse reads raw. A message whose header cannot be read, or with a
// header block (its own or a part's) past MaxHeaderFields or
// MaxHeaderBytes (ErrHeaderTooLarge), is an error; a body part that
// cannot be decoded is skipped (what could be read is kept).
func Parse(raw []byte) (*Parsed, error) {
	if err := CheckHeaders(raw); err != nil {
		return nil, err
	}
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("read message: %w", err)
	}
	p := &Parsed{}
	p.header(e.Header)
	w := walker{p: p}
	if err := w.walk(e, 0); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Parsed) header(h message.Header) {
	fields := h.Fields()
	for fields.Next() {
		v, err := fields.Text()
		if err != nil {
			v = fields.Value()
		}
		p.Headers = append(p.Headers, core.Header{Name: fields.Key(), Value: v})
	}
	p.MessageID = strings.TrimSpace(h.Get("Message-Id"))
	p.InReplyTo = firstMsgID(h.Get("In-Reply-To"))
	p.References = msgIDs(h.Get("References"))
	p.Subject, _ = h.Text("Subject")
	p.Subject = FoldControls(p.Subject)
	p.From = firstAddress(h, "From")
	p.To, p.Cc, p.ReplyTo = addresses(h, "To"), addresses(h, "Cc"), addresses(h, "Reply-To")
	if d, err := mail.ParseDate(h.Get("Date")); err == nil {
		d = d.UTC()
		p.Date = &d
	}
}

// msgIDs reads the <…> tokens of a References-style field.
func msgIDs(v string) []string {
	var out []string
	for len(out) < 100 {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i:], '>')
		if j < 0 {
			break
		}
		out = append(out, v[i:i+j+1])
		v = v[i+j+1:]
	}
	return out
}

func firstMsgID(v string) string {
	if ids := msgIDs(v); len(ids) > 0 {
		return ids[0]
	}
	return strings.TrimSpace(v)
}

func addresses(h message.Header, key string) []string {
	v := h.Get(key)
	if v == "" {
		return nil
	}
	list, err := (&mail.AddressParser{WordDecoder: &mime.WordDecoder{CharsetReader: charsetReader}}).ParseList(v)
	if err != nil {
		return []string{strings.TrimSpace(v)}
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		out = append(out, addressString(a))
	}
	return out
}

// addressString is an address as people write it: a bare address bare
// (net/mail's String wraps it in angle brackets, "<ann@b.test>"), a named
// one as "Name <addr>".
func addressString(a *mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	return a.String()
}

func firstAddress(h message.Header, key string) string {
	if list := addresses(h, key); len(list) > 0 {
		return list[0]
	}
	return ""
}

func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	return message.CharsetReader(charset, input)
}

// walker visits the leaf parts in order; their index is an attachment's
// Part.
type walker struct {
	p     *Parsed
	leafs int
}

func (w *walker) walk(e *message.Entity, depth int) error {
	if depth > MaxDepth {
		return ErrTooComplex
	}
	if mr := e.MultipartReader(); mr != nil {
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				return nil // a broken tail: keep what came before
			}
			if err := w.walk(part, depth+1); err != nil {
				return err
			}
		}
	}
	w.leafs++
	if w.leafs > MaxParts {
		return ErrTooComplex
	}
	return w.leaf(e, w.leafs-1)
}

func (w *walker) leaf(e *message.Entity, index int) error {
	ct, ctParams, _ := e.Header.ContentType()
	if ct == "" {
		ct = "text/plain"
	}
	disp, dParams, _ := e.Header.ContentDisposition()
	var body []byte
	if (ct == "text/plain" && w.p.Text == "" || ct == "text/html" && w.p.HTML == "") && disp != "attachment" {
		b, err := io.ReadAll(io.LimitReader(e.Body, MaxBodyBytes+1))
		if err != nil {
			return nil // undecodable: skipped
		}
		if len(b) <= MaxBodyBytes {
			if ct == "text/plain" {
				// The line break before the next boundary is the part's
				// last byte to go-message, not the writer's text.
				w.p.Text = strings.TrimRight(string(b), "\r\n")
			} else {
				w.p.HTML = string(b)
			}
			return nil
		}
		body = b // too long to keep as the body: listed as an attachment
	}
	// An attachment's bytes are only counted here; Part decodes them
	// again when they are asked for.
	size, err := io.Copy(io.Discard, e.Body)
	if err != nil {
		return nil // undecodable: skipped
	}
	name := dParams["filename"]
	if name == "" {
		name = ctParams["name"]
	}
	if disp == "" {
		disp = "attachment"
	}
	w.p.Attachments = append(w.p.Attachments, core.ReceivedAttachment{
		ID: "att_" + strconv.Itoa(index), Filename: name, ContentType: ct,
		ContentID: strings.Trim(e.Header.Get("Content-Id"), "<> "), Disposition: disp,
		Size: len(body) + int(size), Part: index,
	})
	return nil
}

// Part returns the decoded bytes of the leaf part index of raw.
func Part(raw []byte, index int) ([]byte, error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("read message: %w", err)
	}
	f := finder{want: index}
	if err := f.find(e, 0); err != nil {
		return nil, err
	}
	if f.got == nil {
		return nil, core.ErrNotFound
	}
	return f.got, nil
}

type finder struct {
	want, seen int
	got        []byte
}

func (f *finder) find(e *message.Entity, depth int) error {
	if depth > MaxDepth || f.got != nil {
		return nil
	}
	if mr := e.MultipartReader(); mr != nil {
		for f.got == nil {
			part, err := mr.NextPart()
			if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				return nil
			}
			if err := f.find(part, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if f.seen == f.want {
		b, err := io.ReadAll(e.Body)
		if err != nil {
			return fmt.Errorf("read part: %w", err)
		}
		f.got = b
	}
	f.seen++
	return nil
}

// FoldControls turns the control characters of a decoded header value
// into spaces: an encoded word may decode to CR, LF or NUL, which no
// header written from the value (a reply's subject) may carry.
func FoldControls(v string) string {
	if !strings.ContainsFunc(v, isControl) {
		return v
	}
	return strings.Join(strings.FieldsFunc(v, isControl), " ")
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }
