package message

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gomail "github.com/emersion/go-message/mail"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// fixedDate is not UTC on purpose: the zone must survive rendering.
var fixedDate = time.Date(2025, time.March, 4, 9, 5, 7, 0, time.FixedZone("", 2*60*60))

func fullMessage() *Message {
	return &Message{
		From: mail.Address{Name: "Zoë Müller", Address: "zoe@example.com"},
		To: []mail.Address{
			{Name: "Doe, Jane", Address: "jane@example.org"},
			{Address: "bob@example.net"},
		},
		Cc:         []mail.Address{{Name: "Ünïcödé, \"quoted\"", Address: "cc@example.org"}},
		ReplyTo:    []mail.Address{{Name: "Support", Address: "support@example.com"}},
		Subject:    "Grüße 👋",
		Text:       "Hallo Jane,\n\nschöne Grüße.\nA line with trailing space \nBye\n",
		HTML:       "<p>Hallo Jane,</p>\n<p>schöne <b>Grüße</b> 👋</p>\n",
		MessageID:  "<snd_01HQ3Z9X4K7V2B8N6M5P0R1S2T@example.com>",
		Date:       fixedDate,
		InReplyTo:  "<parent@mail.example.org>",
		References: []string{"<root@mail.example.org>"},
		Headers: []Header{
			{Name: "X-Campaign", Value: "spring-2025"},
			{Name: "List-Unsubscribe", Value: "<https://example.com/u/abc>, <mailto:u@example.com?subject=unsubscribe>"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
			{Name: "X-Note", Value: "naïve café"},
		},
	}
}

type parsedPart struct {
	contentType string
	params      map[string]string
	cte         string
	body        string
}

type parsed struct {
	header gomail.Header
	parts  []parsedPart
}

// parse reads raw back with go-message, an independent MIME implementation,
// decoding transfer encodings.
func parse(t testing.TB, raw []byte) parsed {
	t.Helper()
	mr, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("CreateReader: %v\n%s", err, raw)
	}
	p := parsed{header: mr.Header}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("NextPart: %v\n%s", err, raw)
		}
		h := part.Header.(*gomail.InlineHeader)
		ct, params, err := h.ContentType()
		if err != nil {
			t.Fatalf("part Content-Type: %v", err)
		}
		body, err := io.ReadAll(part.Body)
		if err != nil {
			t.Fatalf("read part body: %v", err)
		}
		p.parts = append(p.parts, parsedPart{ct, params, h.Get("Content-Transfer-Encoding"), string(body)})
	}
	return p
}

// headerSection returns the raw header lines (without CRLF) and the field
// names in order, as a strict reader of the wire format sees them.
func headerSection(t testing.TB, raw []byte) (lines []string, names []string) {
	t.Helper()
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		t.Fatalf("no end of header section:\n%s", raw)
	}
	for _, l := range strings.Split(string(raw[:end]), "\r\n") {
		lines = append(lines, l)
		if l != "" && (l[0] == ' ' || l[0] == '\t') {
			continue
		}
		name, _, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("header line without colon: %q", l)
		}
		names = append(names, name)
	}
	return lines, names
}

// normalize is the body line-ending normalisation Build promises.
func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// checkWire asserts the invariants every rendered message must hold.
func checkWire(t testing.TB, raw []byte) {
	t.Helper()
	for i, l := range bytes.Split(raw, []byte("\r\n")) {
		if bytes.ContainsAny(l, "\r\n") {
			t.Fatalf("line %d has a bare CR or LF: %q", i+1, l)
		}
		if len(l) > maxLineLen {
			t.Fatalf("line %d is %d octets, limit %d", i+1, len(l), maxLineLen)
		}
	}
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		t.Fatalf("message does not end with CRLF")
	}
}

func mustBuild(t testing.TB, m *Message) []byte {
	t.Helper()
	raw, err := Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	checkWire(t, raw)
	return raw
}

func addrs(t testing.TB, h gomail.Header, key string) []mail.Address {
	t.Helper()
	list, err := h.AddressList(key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	out := make([]mail.Address, 0, len(list))
	for _, a := range list {
		out = append(out, mail.Address{Name: a.Name, Address: a.Address})
	}
	return out
}

func equalAddrs(a, b []mail.Address) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBuildMultipartRoundTrip(t *testing.T) {
	m := fullMessage()
	raw := mustBuild(t, m)
	p := parse(t, raw)
	h := p.header

	if got, err := h.Subject(); err != nil || got != m.Subject {
		t.Errorf("Subject = %q, %v; want %q", got, err, m.Subject)
	}
	if got := addrs(t, h, "From"); !equalAddrs(got, []mail.Address{m.From}) {
		t.Errorf("From = %+v; want %+v", got, m.From)
	}
	if got := addrs(t, h, "To"); !equalAddrs(got, m.To) {
		t.Errorf("To = %+v; want %+v", got, m.To)
	}
	if got := addrs(t, h, "Cc"); !equalAddrs(got, m.Cc) {
		t.Errorf("Cc = %+v; want %+v", got, m.Cc)
	}
	if got := addrs(t, h, "Reply-To"); !equalAddrs(got, m.ReplyTo) {
		t.Errorf("Reply-To = %+v; want %+v", got, m.ReplyTo)
	}
	if got, err := h.Date(); err != nil || !got.Equal(m.Date) {
		t.Errorf("Date = %v, %v; want %v", got, err, m.Date)
	}
	if !strings.Contains(string(raw), "Date: Tue, 04 Mar 2025 09:05:07 +0200\r\n") {
		t.Errorf("Date not in RFC 5322 form with the given zone:\n%s", raw)
	}
	if got := h.Get("Message-Id"); got != m.MessageID {
		t.Errorf("Message-ID = %q; want %q", got, m.MessageID)
	}
	if got := h.Get("In-Reply-To"); got != m.InReplyTo {
		t.Errorf("In-Reply-To = %q; want %q", got, m.InReplyTo)
	}
	if got, err := h.MsgIDList("References"); err != nil || strings.Join(got, " ") != "root@mail.example.org parent@mail.example.org" {
		t.Errorf("References = %q, %v; want root then parent", got, err)
	}
	if got := h.Get("MIME-Version"); got != "1.0" {
		t.Errorf("MIME-Version = %q", got)
	}
	for _, x := range m.Headers {
		got, err := h.Text(x.Name)
		if err != nil || got != x.Value {
			t.Errorf("%s = %q, %v; want %q", x.Name, got, err, x.Value)
		}
	}
	if h.Has("Bcc") || bytes.Contains(bytes.ToLower(raw), []byte("bcc")) {
		t.Errorf("Bcc leaked into the message")
	}

	ct, params, err := h.ContentType()
	if err != nil || ct != "multipart/alternative" || params["boundary"] != boundaryFor(m.MessageID) {
		t.Errorf("Content-Type = %q %v, %v", ct, params, err)
	}
	if len(p.parts) != 2 {
		t.Fatalf("got %d parts, want 2", len(p.parts))
	}
	want := []parsedPart{
		{"text/plain", map[string]string{"charset": "utf-8"}, "quoted-printable", normalize(m.Text)},
		{"text/html", map[string]string{"charset": "utf-8"}, "quoted-printable", normalize(m.HTML)},
	}
	for i, w := range want {
		g := p.parts[i]
		if g.contentType != w.contentType || g.params["charset"] != "utf-8" || g.cte != w.cte {
			t.Errorf("part %d: %s %v %s; want %s charset=utf-8 %s", i, g.contentType, g.params, g.cte, w.contentType, w.cte)
		}
		if g.body != w.body {
			t.Errorf("part %d body = %q; want %q", i, g.body, w.body)
		}
	}
}

// TestBuildParsesWithStdlib reads the message with net/mail and mime/multipart
// as well, so we are not merely compatible with one parser's leniency.
func TestBuildParsesWithStdlib(t *testing.T) {
	m := fullMessage()
	raw := mustBuild(t, m)
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	dec := new(mime.WordDecoder)
	if got, err := dec.DecodeHeader(msg.Header.Get("Subject")); err != nil || got != m.Subject {
		t.Errorf("Subject = %q, %v", got, err)
	}
	from, err := mail.ParseAddress(msg.Header.Get("From"))
	if err != nil || *from != m.From {
		t.Errorf("From = %+v, %v", from, err)
	}
	to, err := msg.Header.AddressList("To")
	if err != nil || len(to) != 2 || *to[0] != m.To[0] || *to[1] != m.To[1] {
		t.Errorf("To = %+v, %v", to, err)
	}
	parts := stdlibParts(t, msg)
	if len(parts) != 2 || parts[0] != normalize(m.Text) || parts[1] != normalize(m.HTML) {
		t.Errorf("parts = %q", parts)
	}
}

func TestBuildSinglePart(t *testing.T) {
	for _, tc := range []struct {
		name, text, html, wantType string
	}{
		{"text only", "Plain text, naïve.\nSecond line without newline at end", "", "text/plain"},
		{"text ending in newline", "Hello\r\n", "", "text/plain"},
		{"html only", "", "<p>Only <i>HTML</i> — here</p>", "text/html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fullMessage()
			m.Text, m.HTML = tc.text, tc.html
			raw := mustBuild(t, m)
			p := parse(t, raw)
			ct, params, _ := p.header.ContentType()
			if ct != tc.wantType || params["charset"] != "utf-8" {
				t.Errorf("Content-Type = %s %v; want %s charset=utf-8", ct, params, tc.wantType)
			}
			if got := p.header.Get("Content-Transfer-Encoding"); got != "quoted-printable" {
				t.Errorf("Content-Transfer-Encoding = %q", got)
			}
			if bytes.Contains(raw, []byte(boundaryFor(m.MessageID))) {
				t.Errorf("single-part message contains a multipart boundary")
			}
			if len(p.parts) != 1 || p.parts[0].body != normalize(tc.text+tc.html) {
				t.Errorf("body = %q; want %q", p.parts, normalize(tc.text+tc.html))
			}
		})
	}
}

func TestBuildHeaderOrder(t *testing.T) {
	m := fullMessage()
	_, names := headerSection(t, mustBuild(t, m))
	want := []string{
		"Date", "Message-ID", "From", "To", "Cc", "Reply-To", "Subject",
		"MIME-Version", "Content-Type", "In-Reply-To", "References",
		"X-Campaign", "List-Unsubscribe", "List-Unsubscribe-Post", "X-Note",
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("header order\n got %v\nwant %v", names, want)
	}

	// Optional fields disappear rather than render empty.
	m.To, m.Cc, m.ReplyTo, m.InReplyTo, m.References, m.Headers, m.HTML = nil, nil, nil, "", nil, nil, ""
	_, names = headerSection(t, mustBuild(t, m))
	want = []string{"Date", "Message-ID", "From", "Subject", "MIME-Version", "Content-Type", "Content-Transfer-Encoding"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("minimal header order\n got %v\nwant %v", names, want)
	}
}

func TestBuildReferences(t *testing.T) {
	m := fullMessage()
	m.References = []string{"<a@x>", "<parent@mail.example.org>"}
	p := parse(t, mustBuild(t, m))
	if got := p.header.Get("References"); got != "<a@x> <parent@mail.example.org>" {
		t.Errorf("References = %q; InReplyTo already present must not be repeated", got)
	}

	m.InReplyTo = ""
	m.References = nil
	for i := range 40 {
		m.References = append(m.References, fmt.Sprintf("<ref-%02d.abcdefghij@mail.example.org>", i))
	}
	raw := mustBuild(t, m)
	lines, _ := headerSection(t, raw)
	for _, l := range lines {
		if len(l) > softLineLen {
			t.Errorf("References line longer than %d: %q", softLineLen, l)
		}
	}
	h := parse(t, raw).header
	if got, _ := h.MsgIDList("References"); len(got) != 40 {
		t.Errorf("References round-trip: %d ids", len(got))
	}
}

func TestBuildRejectsInjection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Message)
		field  string
	}{
		{"CRLF in subject", func(m *Message) { m.Subject = "Hi\r\nBcc: evil@example.com" }, "Subject"},
		{"LF in subject", func(m *Message) { m.Subject = "Hi\nBcc: evil@example.com" }, "Subject"},
		{"NUL in subject", func(m *Message) { m.Subject = "Hi\x00there" }, "Subject"},
		{"LF in from name", func(m *Message) { m.From.Name = "Zoë\nBcc: evil@example.com" }, "From"},
		{"CR in from address", func(m *Message) { m.From.Address = "zoe@example.com\rBcc: x@y" }, "From"},
		{"LF in to name", func(m *Message) { m.To[1].Name = "Bob\n" }, "To"},
		{"CR in to address", func(m *Message) { m.To[0].Address = "jane@example.org\r" }, "To"},
		{"NUL in cc name", func(m *Message) { m.Cc[0].Name = "a\x00b" }, "Cc"},
		{"CRLF in reply-to address", func(m *Message) { m.ReplyTo[0].Address = "s@example.com\r\nX: y" }, "Reply-To"},
		{"address smuggling a recipient", func(m *Message) { m.To[0].Address = "jane@example.org>, <evil" }, "To"},
		{"address smuggling a comment", func(m *Message) { m.To[0].Address = "jane@example.org> (x)" }, "To"},
		{"address without @", func(m *Message) { m.To[0].Address = "jane" }, "To"},
		{"empty from", func(m *Message) { m.From = mail.Address{} }, "From"},
		{"CRLF in message-id", func(m *Message) { m.MessageID = "<a@b>\r\nBcc: x@y" }, "Message-ID"},
		{"message-id without brackets", func(m *Message) { m.MessageID = "a@b" }, "Message-ID"},
		{"message-id with space", func(m *Message) { m.MessageID = "<a b@c>" }, "Message-ID"},
		{"LF in in-reply-to", func(m *Message) { m.InReplyTo = "<a@b>\nBcc: x@y" }, "In-Reply-To"},
		{"CR in references", func(m *Message) { m.References = []string{"<a@b>\rBcc: x@y"} }, "References"},
		{"Bcc extra header", func(m *Message) { m.Headers = []Header{{"Bcc", "evil@example.com"}} }, "Bcc"},
		{"bcc lower-case extra header", func(m *Message) { m.Headers = []Header{{"bcc", "evil@example.com"}} }, "bcc"},
		{"injected value", func(m *Message) { m.Headers = []Header{{"X-Ok", "1\r\nBcc: evil@example.com"}} }, "X-Ok"},
		{"bare LF value", func(m *Message) { m.Headers = []Header{{"X-Ok", "1\nBcc: evil@example.com"}} }, "X-Ok"},
		{"NUL value", func(m *Message) { m.Headers = []Header{{"X-Ok", "a\x00"}} }, "X-Ok"},
		{"name with space", func(m *Message) { m.Headers = []Header{{"X Bad", "v"}} }, "X Bad"},
		{"name with colon", func(m *Message) { m.Headers = []Header{{"X-Bad:", "v"}} }, "X-Bad:"},
		{"name with CRLF", func(m *Message) { m.Headers = []Header{{"X-A\r\nBcc", "v"}} }, "X-A\r\nBcc"},
		{"name with NUL", func(m *Message) { m.Headers = []Header{{"X-\x00", "v"}} }, "X-\x00"},
		{"invalid UTF-8 subject", func(m *Message) { m.Subject = "bad \xff" }, "Subject"},
		{"zero date", func(m *Message) { m.Date = time.Time{} }, "Date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fullMessage()
			tc.mutate(m)
			raw, err := Build(m)
			var he *HeaderError
			if !errors.As(err, &he) {
				t.Fatalf("Build error = %v; want *HeaderError (output %q)", err, raw)
			}
			if raw != nil {
				t.Errorf("Build returned output alongside an error")
			}
			if he.Field != tc.field {
				t.Errorf("Field = %q; want %q (%v)", he.Field, tc.field, he)
			}
			if strings.ContainsAny(he.Error(), "\r\n\x00") {
				t.Errorf("error message itself carries the injection: %q", he.Error())
			}
		})
	}
}

func TestBuildSubjectEdgeCases(t *testing.T) {
	for _, subject := range []string{
		"",
		"Plain ASCII",
		"=?utf-8?q?looks_encoded?=", // must read back literally, not decoded
		" padded both ends ",        // parsers trim raw values
		"double  space and\ttab",
		"bell\x07 and DEL\x7f",
		"_underscores_ and = and ? marks",
		"日本語のメール件名",
	} {
		m := fullMessage()
		m.Subject = subject
		h := parse(t, mustBuild(t, m)).header
		got, err := h.Subject()
		if err != nil || got != subject {
			t.Errorf("Subject %q read back as %q, %v", subject, got, err)
		}
	}
}

func TestBuildAwkwardNames(t *testing.T) {
	for _, name := range []string{
		"Zoë \\ Backslash", // net/mail Q-encodes this unparseably; we fall back to B
		"\x14\\",
		"\"Quoted\" Ünïcödé",
		"O'Brien, Pat (Sales)",
		"   ",
		"=?utf-8?q?not_encoded?=",
		"tab\there",
		"😀",
	} {
		m := fullMessage()
		m.From.Name = name
		m.To[0].Name = name
		p := parse(t, mustBuild(t, m))
		if got := addrs(t, p.header, "From"); got[0] != m.From {
			t.Errorf("From %q read back as %q", name, got[0].Name)
		}
		if got := addrs(t, p.header, "To"); got[0] != m.To[0] {
			t.Errorf("To %q read back as %q", name, got[0].Name)
		}
	}
}

func TestBuildExtraHeaderPassthrough(t *testing.T) {
	m := fullMessage()
	// A caller may send a value it encoded itself; re-encoding it would show
	// the recipient the raw encoded-word.
	m.Headers = []Header{{Name: "X-Pre", Value: "=?utf-8?q?caf=C3=A9?="}}
	raw := mustBuild(t, m)
	if !bytes.Contains(raw, []byte("\r\nX-Pre: =?utf-8?q?caf=C3=A9?=\r\n")) {
		t.Errorf("pre-encoded value was not passed through:\n%s", raw)
	}
}

func TestHeaderErrorMessage(t *testing.T) {
	err := CheckHeader("X-A\r\nBcc", "v")
	want := `message: header "X-A\r\nBcc": invalid field name: only printable ASCII without spaces or ':' is allowed`
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %q; want %q", err, want)
	}
}

func TestBuildNoBody(t *testing.T) {
	m := fullMessage()
	m.Text, m.HTML = "", ""
	if _, err := Build(m); !errors.Is(err, ErrNoBody) {
		t.Fatalf("err = %v; want ErrNoBody", err)
	}
	if _, err := Build(nil); err == nil {
		t.Fatal("Build(nil) succeeded")
	}
}

func TestCheckHeader(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"X-Campaign", "spring", true},
		{"List-Unsubscribe", "<https://example.com/u?a=1&b=2>", true},
		{"X-Empty", "", true},
		{"X-Unicode", "Grüße 👋", true},
		{"X-Tab", "a\tb", true},
		{"X-Ctl", "bell\x07", true}, // encoded on output, not an injection
		{"x!#$%&'*+-.^_`|~", "symbols are valid ftext", true},
		{strings.Repeat("X", maxNameLen), "v", true},
		{strings.Repeat("X", maxNameLen+1), "v", false},
		{"", "v", false},
		{"X Space", "v", false},
		{"X:Colon", "v", false},
		{"X-Ünicode", "v", false},
		{"X-\x7f", "v", false},
		{"X-Ok", "a\r\nBcc: evil", false},
		{"X-Ok", "a\rb", false},
		{"X-Ok", "a\nb", false},
		{"X-Ok", "a\x00b", false},
		{"X-Ok", "\xc3\x28", false},
	} {
		err := CheckHeader(tc.name, tc.value)
		var he *HeaderError
		if tc.ok != (err == nil) || (err != nil && !errors.As(err, &he)) {
			t.Errorf("CheckHeader(%q, %q) = %v; want ok=%v", tc.name, tc.value, err, tc.ok)
		}
	}
	for _, name := range []string{
		"From", "To", "Cc", "Bcc", "Reply-To", "Subject", "Date", "Message-ID",
		"MIME-Version", "Content-Type", "Content-Transfer-Encoding", "In-Reply-To",
		"References", "Return-Path", "Received", "DKIM-Signature", "Sender",
	} {
		for _, n := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			err := CheckHeader(n, "x")
			var he *HeaderError
			if !errors.As(err, &he) || !strings.Contains(he.Reason, "reserved") {
				t.Errorf("CheckHeader(%q) = %v; want reserved *HeaderError", n, err)
			}
		}
	}
}

func TestHasLineBreak(t *testing.T) {
	for s, want := range map[string]bool{
		"": false, "plain": false, "tab\tok": false, "ünï": false,
		"a\rb": true, "a\nb": true, "a\r\n": true, "\x00": true,
	} {
		if got := HasLineBreak(s); got != want {
			t.Errorf("HasLineBreak(%q) = %v; want %v", s, got, want)
		}
	}
}

func TestNewMessageID(t *testing.T) {
	for _, tc := range []struct{ id, from, want string }{
		{"snd_01H", "zoe@example.com", "<snd_01H@example.com>"},
		{"snd_01H", "a@b@mail.example.com", "<snd_01H@mail.example.com>"},
		{"snd_01H", "no-at-sign", "<snd_01H@localhost>"},
		{"snd_01H", "", "<snd_01H@localhost>"},
		{"snd_01H", "zoe@", "<snd_01H@localhost>"},
		{"snd_01H", "zoe@exa mple.com", "<snd_01H@localhost>"},
		{"snd_01H", "zoe@example.com>\r\nBcc: x", "<snd_01H@localhost>"},
		{"snd_01H", "zoe@.example.com", "<snd_01H@localhost>"},
	} {
		got := NewMessageID(tc.id, tc.from)
		if got != tc.want {
			t.Errorf("NewMessageID(%q, %q) = %q; want %q", tc.id, tc.from, got, tc.want)
		}
		if err := checkMsgID("Message-ID", got); err != nil {
			t.Errorf("NewMessageID(%q, %q) = %q is not accepted by Build: %v", tc.id, tc.from, got, err)
		}
	}
}

func TestBuildDeterministic(t *testing.T) {
	a := mustBuild(t, fullMessage())
	b := mustBuild(t, fullMessage())
	if !bytes.Equal(a, b) {
		t.Fatalf("two builds differ:\n%s\n---\n%s", a, b)
	}
	// The boundary follows the Message-ID, so distinct sends get distinct ones.
	m := fullMessage()
	m.MessageID = "<other@example.com>"
	c := mustBuild(t, m)
	if bytes.Contains(c, []byte(boundaryFor(fullMessage().MessageID))) {
		t.Errorf("boundary does not depend on the Message-ID")
	}
}

// TestBuildGolden pins the exact bytes. Retries re-render stored sends, so any
// change here changes what a retry transmits; update deliberately with
// go test -run Golden -update.
func TestBuildGolden(t *testing.T) {
	for name, m := range map[string]*Message{
		"multipart.eml": fullMessage(),
		"text.eml": func() *Message {
			m := fullMessage()
			m.HTML = ""
			return m
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			raw := mustBuild(t, m)
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(raw, want) {
				t.Errorf("output differs from %s:\n got:\n%s\nwant:\n%s", path, raw, want)
			}
		})
	}
}

func TestBuildLongLines(t *testing.T) {
	subjects := map[string]string{
		"ascii without spaces": strings.Repeat("a", 5000),
		"ascii words":          strings.TrimSpace(strings.Repeat("lorem ipsum dolor ", 5000/18+1)[:5000]),
		"non-ascii":            strings.Repeat("Grüße 👋 ", 5000/9),
		"one long url":         "See https://example.com/" + strings.Repeat("x", 4970),
	}
	longLine := strings.Repeat("0123456789", 300) // 3,000 characters, no break
	for name, subject := range subjects {
		t.Run(name, func(t *testing.T) {
			m := fullMessage()
			m.Subject = subject
			m.Text = "start\n" + longLine + "\nend ü " + strings.Repeat("é", 3000)
			m.HTML = "<p>" + longLine + "</p>"
			m.From.Name = strings.Repeat("Zoë Müller ", 200)
			m.To[0].Name = strings.Repeat("J", 2000)
			raw := mustBuild(t, m) // checks the 998 limit on every line
			lines, _ := headerSection(t, raw)
			for _, l := range lines {
				if strings.HasPrefix(l, "Subject:") || strings.HasPrefix(l, " =?utf-8?") {
					if len(l) > softLineLen {
						t.Errorf("subject line is %d octets, want <= %d: %q", len(l), softLineLen, l)
					}
				}
			}
			p := parse(t, raw)
			if got, err := p.header.Subject(); err != nil || got != subject {
				t.Errorf("Subject did not round-trip (err %v)", err)
			}
			if got := addrs(t, p.header, "From"); got[0] != m.From {
				t.Errorf("From name did not round-trip")
			}
			if got := addrs(t, p.header, "To"); got[0] != m.To[0] {
				t.Errorf("To name did not round-trip")
			}
			if p.parts[0].body != normalize(m.Text) || p.parts[1].body != m.HTML {
				t.Errorf("bodies did not round-trip")
			}
		})
	}
}

// TestBuildBoundaryForgery: the boundary is computable from the Message-ID,
// so a hostile body may contain it verbatim; it must stay body text.
func TestBuildBoundaryForgery(t *testing.T) {
	m := fullMessage()
	b := boundaryFor(m.MessageID)
	m.Text = "before\r\n--" + b + "\r\nContent-Type: text/html\r\n\r\n<evil>\r\n--" + b + "--\r\nafter"
	p := parse(t, mustBuild(t, m))
	if len(p.parts) != 2 || p.parts[0].body != m.Text || p.parts[1].body != normalize(m.HTML) {
		t.Fatalf("body text split the MIME structure: %q", p.parts)
	}
}

func TestBuildLineEndings(t *testing.T) {
	m := fullMessage()
	// "\ré\n": quotedprintable.Writer alone would drop that LF.
	m.Text = "unix\nmac\rwindows\r\nmixed\n\r\n\rend\n\ré\n\r\xe3\n=\r"
	m.HTML = "<p>\n</p>\r"
	raw := mustBuild(t, m) // checkWire rejects any bare CR or LF
	p := parse(t, raw)
	if p.parts[0].body != normalize(m.Text) || p.parts[1].body != normalize(m.HTML) {
		t.Errorf("line endings: got %q", p.parts)
	}
}

func stdlibParts(t *testing.T, msg *mail.Message) []string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q: %v", mt, err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var out []string
	for {
		// NextRawPart: NextPart would decode quoted-printable itself and
		// hide the Content-Transfer-Encoding header we want to see.
		part, err := mr.NextRawPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("NextRawPart: %v", err)
		}
		if cte := part.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
			t.Fatalf("part Content-Transfer-Encoding = %q", cte)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(part))
		if err != nil {
			t.Fatalf("decode part: %v", err)
		}
		out = append(out, string(body))
	}
}

func FuzzBuild(f *testing.F) {
	f.Add("Grüße 👋", "Zoë Müller", "Hello\nworld", "<p>Hi</p>", "v")
	f.Add("Hi\r\nBcc: evil@example.com", "n", "t", "", "v")
	f.Add("s", "Evil\nBcc: x@y", "t", "h", "v")
	f.Add("s", "n", "", "", "v")
	f.Add("s", "n", "t", "h", "1\r\nBcc: evil@example.com")
	f.Add(" =?utf-8?q?Bcc:_x?= ", "\"quoted\" <x@y>", "=\r\n.\r\n", "--=_", "=?utf-8?b?QmNjOiB4?=")
	f.Add(strings.Repeat("x", 1200), strings.Repeat("y", 1200), strings.Repeat("z", 3000), "", strings.Repeat("w ", 600))
	f.Add("a  b\t c", "  spaced  ", "trailing space \n", "\r", "\t")
	f.Add("\xff", "\xfe", "\xff", "", "")
	f.Fuzz(func(t *testing.T, subject, name, text, html, value string) {
		m := &Message{
			From:      mail.Address{Name: name, Address: "from@example.com"},
			To:        []mail.Address{{Name: name, Address: "to@example.org"}},
			Subject:   subject,
			Text:      text,
			HTML:      html,
			MessageID: "<fuzz@example.com>",
			Date:      fixedDate,
			Headers:   []Header{{Name: "X-Fuzz", Value: value}},
		}
		raw, err := Build(m)
		clean := func(s string) bool { return !HasLineBreak(s) && utf8.ValidString(s) }
		if err != nil {
			var he *HeaderError
			switch {
			case text == "" && html == "":
				if !errors.Is(err, ErrNoBody) {
					t.Fatalf("no body: err = %v; want ErrNoBody", err)
				}
			case !errors.As(err, &he):
				t.Fatalf("Build error %v is not a *HeaderError", err)
			case clean(subject) && clean(name) && clean(value):
				t.Fatalf("Build rejected clean input: %v", err)
			}
			return
		}
		if !clean(subject) || !clean(name) || !clean(value) {
			t.Fatalf("Build accepted unsafe input")
		}
		checkWire(t, raw)
		_, names := headerSection(t, raw)
		want := []string{"Date", "Message-ID", "From", "To", "Subject", "MIME-Version", "Content-Type"}
		if text == "" || html == "" {
			want = append(want, "Content-Transfer-Encoding")
		}
		want = append(want, "X-Fuzz")
		if strings.Join(names, "\n") != strings.Join(want, "\n") {
			t.Fatalf("header fields = %q; want %q (a line was injected)\n%s", names, want, raw)
		}

		p := parse(t, raw)
		if got, err := p.header.Subject(); err != nil || got != subject {
			t.Fatalf("Subject = %q, %v; want %q", got, err, subject)
		}
		for _, key := range []string{"From", "To"} {
			if got := addrs(t, p.header, key); len(got) != 1 || got[0].Name != name {
				t.Fatalf("%s = %+v; want name %q", key, got, name)
			}
		}
		gotValue, err := p.header.Text("X-Fuzz")
		wantValue := value
		if plainASCII(value) {
			// Raw caller values are written as given, so read them raw:
			// decoding would interpret (or choke on) anything that merely
			// looks pre-encoded. Parsers do trim the ends.
			gotValue, wantValue, err = p.header.Get("X-Fuzz"), strings.Trim(value, " \t"), nil
		}
		if err != nil || gotValue != wantValue {
			t.Fatalf("X-Fuzz = %q, %v; want %q", gotValue, err, wantValue)
		}
		var bodies []string
		for _, part := range p.parts {
			bodies = append(bodies, part.body)
		}
		var wantBodies []string
		for _, b := range []string{text, html} {
			if b != "" {
				wantBodies = append(wantBodies, normalize(b))
			}
		}
		if strings.Join(bodies, "\x00") != strings.Join(wantBodies, "\x00") || len(bodies) != len(wantBodies) {
			t.Fatalf("bodies = %q; want %q", bodies, wantBodies)
		}
	})
}
