package submission

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/mail"
	"slices"
	"strings"

	gomessage "github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets mail uses, not only UTF-8
	"github.com/emersion/go-message/textproto"
)

// The fingerprint of a submitted message is what the message says, not
// how its client encoded it (docs/smtp.md, "Retries"). Real clients —
// Nodemailer, swaks, smtplib with MIME parts — rebuild a message on every
// retry: a new Date, new MIME boundaries, another transfer encoding, an
// encoded word folded elsewhere. Covering the bytes turned each of those
// retries into a refusal the client reports as permanent, and its app
// into the one that sends a second email. What it covers: the envelope;
// every header the client set but those that change on a rebuild (Date,
// X-Mailer, User-Agent, the key headers, Message-ID when a key header is
// given, and the MIME framing), each decoded and unfolded; and each MIME
// part's type, disposition, file name and decoded content, text with its
// line endings and trailing newlines normalised.

// fingerprintVersion prefixes the fingerprint, so a record made under the
// bytes fingerprint of earlier versions is told apart (legacyFingerprint).
const fingerprintVersion = "smtp2:"

// Bounds of the walk: a stranger's message is bounded by the size limit,
// and its shape by these; what lies past them is covered as raw bytes.
const (
	maxFingerprintDepth = 16
	maxFingerprintParts = 500
)

// ignoredHeaders change when a client rebuilds the same message, or are
// covered elsewhere (the MIME framing by the part walk).
var ignoredHeaders = map[string]bool{
	"date": true, "x-mailer": true, "user-agent": true,
	"idempotency-key": true, "resend-idempotency-key": true,
	"mime-version": true, "content-type": true, "content-transfer-encoding": true,
	"content-disposition": true, "content-id": true,
}

// addressHeaders are compared as address lists: a rebuilt message may
// quote a display name or encode it otherwise.
var addressHeaders = map[string]bool{
	"from": true, "sender": true, "reply-to": true, "to": true, "cc": true, "bcc": true,
}

// fingerprint is a submission's identity under its key: the envelope
// (sender, recipients in any order and case) and what the message says.
// keyHeader says whether the key came from a key header: then the
// Message-ID, which a client may make anew on a retry, is not covered.
func fingerprint(env envelope, msg []byte, keyHeader bool) string {
	h := sha256.New()
	writeEnvelope(h, env)
	canonicalMessage(h, msg, keyHeader)
	return fingerprintVersion + hex.EncodeToString(h.Sum(nil))
}

// legacyFingerprint is the fingerprint earlier versions stored: the
// envelope and the message's bytes less the key header. A retry of a
// message accepted before the upgrade, with the same bytes, still
// replays.
func legacyFingerprint(env envelope, msg []byte) string {
	h := sha256.New()
	writeEnvelope(h, env)
	h.Write(msg)
	return hex.EncodeToString(h.Sum(nil))
}

func writeEnvelope(h hash.Hash, env envelope) {
	rcpt := make([]string, len(env.rcpt))
	for i, r := range env.rcpt {
		rcpt[i] = strings.ToLower(r)
	}
	slices.Sort(rcpt)
	fmt.Fprintf(h, "smtp\x00%s\x00%s\x00", strings.ToLower(env.from), strings.Join(rcpt, "\x00"))
}

// canonicalMessage writes the message's meaning to h; a message whose
// MIME structure does not parse is covered by its bytes from there on.
func canonicalMessage(h io.Writer, msg []byte, keyHeader bool) {
	e, _ := gomessage.Read(bytes.NewReader(msg)) // an unknown charset still gives the entity
	if e == nil {
		fmt.Fprintf(h, "raw\x00%d\x00", len(msg))
		h.Write(msg)
		return
	}
	writeHeaders(h, e.Header.Header, keyHeader)
	parts := 0
	writePart(h, e, 0, &parts)
}

// writeHeaders writes the headers that carry meaning, decoded, unfolded
// and sorted (a rebuild may order them otherwise).
func writeHeaders(h io.Writer, hdr textproto.Header, keyHeader bool) {
	var lines []string
	for f := hdr.Fields(); f.Next(); {
		name := strings.ToLower(f.Key())
		if ignoredHeaders[name] || (keyHeader && name == "message-id") {
			continue
		}
		lines = append(lines, name+"\x00"+headerValue(name, f.Value()))
	}
	slices.Sort(lines)
	fmt.Fprintf(h, "headers\x00%d\x00", len(lines))
	for _, l := range lines {
		io.WriteString(h, l)
		io.WriteString(h, "\x00")
	}
}

var wordDecoder = mime.WordDecoder{CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
	if gomessage.CharsetReader == nil {
		return nil, fmt.Errorf("unknown charset %q", charset)
	}
	return gomessage.CharsetReader(charset, input)
}}

// headerValue is a header's meaning: address lists as lower-case
// addresses with their decoded names, other values decoded with their
// white space collapsed.
func headerValue(name, v string) string {
	if addressHeaders[name] {
		if list, err := (&mail.AddressParser{WordDecoder: &wordDecoder}).ParseList(v); err == nil {
			out := make([]string, len(list))
			for i, a := range list {
				out[i] = strings.Join(strings.Fields(a.Name), " ") + " <" + strings.ToLower(a.Address) + ">"
			}
			return strings.Join(out, ", ")
		}
	}
	if d, err := wordDecoder.DecodeHeader(v); err == nil {
		v = d
	}
	return strings.Join(strings.Fields(v), " ")
}

// writePart writes one MIME part: its type, disposition and file name,
// then its parts or its decoded content.
func writePart(h io.Writer, e *gomessage.Entity, depth int, parts *int) {
	*parts++
	mediaType, _, _ := e.Header.ContentType()
	disp, dparams, _ := e.Header.ContentDisposition()
	filename := dparams["filename"]
	if filename == "" {
		_, cparams, _ := e.Header.ContentType()
		filename = cparams["name"]
	}
	if d, err := wordDecoder.DecodeHeader(filename); err == nil {
		filename = d
	}
	fmt.Fprintf(h, "part\x00%s\x00%s\x00%s\x00", strings.ToLower(mediaType), strings.ToLower(disp), filename)
	if mr := e.MultipartReader(); mr != nil && depth < maxFingerprintDepth {
		for *parts < maxFingerprintParts {
			p, err := mr.NextPart()
			if err != nil {
				if err != io.EOF {
					io.WriteString(h, "broken\x00")
				}
				break
			}
			writePart(h, p, depth+1, parts)
		}
		io.WriteString(h, "end\x00")
		return
	}
	body, _ := io.ReadAll(e.Body) // transfer-decoded; bounded by the message size
	if strings.HasPrefix(strings.ToLower(mediaType), "text/") {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
		body = bytes.TrimRight(body, "\r\n")
	}
	fmt.Fprintf(h, "body\x00%d\x00", len(body))
	h.Write(body)
}
