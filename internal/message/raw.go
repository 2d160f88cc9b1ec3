package message

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/emersion/go-message/textproto"
)

// A raw message is one a client wrote itself (SMTP submission): sendonce
// keeps its header fields and body byte for byte, and only removes or adds
// whole fields. go-message's textproto keeps each field's raw bytes, so a
// field nobody touched is written back exactly as it was read.

// ReadRaw splits a raw message into its header and body. A message whose
// header block does not parse is an error.
func ReadRaw(raw []byte) (textproto.Header, []byte, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	h, err := textproto.ReadHeader(br)
	if err != nil {
		return textproto.Header{}, nil, fmt.Errorf("message header: %w", err)
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return textproto.Header{}, nil, fmt.Errorf("message body: %w", err)
	}
	return h, body, nil
}

// WriteRaw joins a header and a body read by ReadRaw.
func WriteRaw(h textproto.Header, body []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(body) + 1024)
	_ = textproto.WriteHeader(&b, h) // a bytes.Buffer does not fail
	b.Write(body)
	return b.Bytes()
}

// CompleteRaw adds what RFC 5322 requires and a client may leave to its
// submission server (RFC 6409 §8): Message-ID (messageID, with brackets)
// and Date, each only when absent. The added fields go first; the
// client's bytes follow untouched. The result is the same on every
// attempt of a send.
func CompleteRaw(raw []byte, messageID string, date time.Time) ([]byte, error) {
	h, _, err := ReadRaw(raw)
	if err != nil {
		return nil, err
	}
	var add bytes.Buffer
	if !h.Has("Message-Id") && messageID != "" {
		if err := checkMsgID("Message-ID", messageID); err != nil {
			return nil, err
		}
		add.WriteString("Message-ID: " + messageID + "\r\n")
	}
	if !h.Has("Date") {
		add.WriteString("Date: " + date.Format(time.RFC1123Z) + "\r\n")
	}
	if add.Len() == 0 {
		return raw, nil
	}
	return append(add.Bytes(), raw...), nil
}
