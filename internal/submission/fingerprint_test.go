package submission

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"mime"
	"strings"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
)

// meaning is what a test message says; encode writes it one way of many.
type meaning struct {
	from, to, cc, subject string
	text, html            string
	attName               string
	att                   []byte
	extra                 [2]string // a header the client set: name, value
}

func baseMeaning() meaning {
	att := make([]byte, 3000)
	for i := range att {
		att[i] = byte(i * 7)
	}
	return meaning{from: "Ada Lovelace <ada@example.com>", to: "bob@example.net", cc: "Cé Dé <cd@example.org>",
		subject: "Grüße — your invoice №42 is ready, with a long subject that folds", text: "Hello Bob,\n\nyour invoice is attached.\n",
		html: "<p>Hello Bob,</p><p>your invoice is attached.</p>", attName: "invoice 42.pdf", att: att,
		extra: [2]string{"X-Campaign", "december"}}
}

// encode renders m as a client might on one try: its own Date, Message-ID
// and boundaries, a transfer encoding, header folding and word encoding
// of its choice, and its own header order.
func encode(t *testing.T, m meaning, r *rand.Rand) []byte {
	t.Helper()
	cte := []string{"quoted-printable", "base64", "8bit"}
	var h mail.Header
	set := []func(){
		func() { h.SetAddressList("From", mustAddrs(t, m.from)) },
		func() { h.SetAddressList("To", mustAddrs(t, m.to)) },
		func() { h.SetAddressList("Cc", mustAddrs(t, m.cc)) },
		func() {
			if r.IntN(2) == 0 {
				h.SetSubject(m.subject)
			} else {
				h.Set("Subject", mime.BEncoding.Encode("utf-8", m.subject))
			}
		},
		func() { h.Set(m.extra[0], m.extra[1]) },
		func() { h.SetDate(time.Date(2026, 12, 6, 10, r.IntN(60), r.IntN(60), 0, time.UTC)) },
		func() { h.Set("Message-Id", fmt.Sprintf("<%d@client.example>", r.Int64())) },
		func() { h.Set("X-Mailer", fmt.Sprintf("client %d", r.IntN(10))) },
		func() { h.Set("Idempotency-Key", "invoice-42") },
	}
	r.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
	for _, f := range set {
		f()
	}
	h.Set("Content-Type", fmt.Sprintf("multipart/mixed; boundary=mixed-%d", r.Int64()))
	var buf bytes.Buffer
	w, err := gomessage.CreateWriter(&buf, h.Header)
	if err != nil {
		t.Fatal(err)
	}
	var alt gomessage.Header
	alt.Set("Content-Type", fmt.Sprintf("multipart/alternative; boundary=alt-%d", r.Int64()))
	aw, err := w.CreatePart(alt)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []struct{ typ, body string }{{"text/plain", m.text}, {"text/html", m.html}} {
		var ph gomessage.Header
		ph.SetContentType(part.typ, map[string]string{"charset": "utf-8"})
		ph.Set("Content-Transfer-Encoding", cte[r.IntN(len(cte))])
		pw, err := aw.CreatePart(ph)
		if err != nil {
			t.Fatal(err)
		}
		body := part.body
		if r.IntN(2) == 0 {
			body = strings.ReplaceAll(body, "\n", "\r\n") // a client that writes CRLF in the text
		}
		if r.IntN(2) == 0 {
			body += "\n" // and one that ends it with a newline
		}
		fmt.Fprint(pw, body)
		pw.Close()
	}
	aw.Close()
	var ah gomessage.Header
	ah.SetContentType("application/pdf", nil)
	ah.SetContentDisposition("attachment", map[string]string{"filename": m.attName})
	ah.Set("Content-Transfer-Encoding", "base64")
	pw, err := w.CreatePart(ah)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(m.att)
	pw.Close()
	w.Close()
	return buf.Bytes()
}

func mustAddrs(t *testing.T, list string) []*mail.Address {
	t.Helper()
	a, err := mail.ParseAddressList(list)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// One message, encoded fifty ways as clients rebuild it on a retry, has
// one fingerprint; the same message with any one meaningful thing changed
// has another.
func TestFingerprint_WhatTheMessageSaysNotHowItWasEncoded(t *testing.T) {
	env := envelope{from: "ada@example.com", rcpt: []string{"bob@example.net", "cd@example.org"}}
	r := rand.New(rand.NewPCG(20261206, 1))
	base := baseMeaning()
	first := fingerprint(env, encode(t, base, r), true)
	for i := range 50 {
		raw := encode(t, base, r)
		if fp := fingerprint(env, raw, true); fp != first {
			t.Fatalf("encoding %d of the same message has another fingerprint:\n%s", i, raw)
		}
	}

	changes := map[string]func(m *meaning){
		"subject":         func(m *meaning) { m.subject += "!" },
		"text":            func(m *meaning) { m.text = strings.Replace(m.text, "Bob", "Rob", 1) },
		"html":            func(m *meaning) { m.html = strings.Replace(m.html, "Bob", "Rob", 1) },
		"attachment":      func(m *meaning) { m.att = append(bytes.Clone(m.att[:len(m.att)-1]), 0xff) },
		"attachment name": func(m *meaning) { m.attName = "invoice 43.pdf" },
		"from name":       func(m *meaning) { m.from = "Ada King <ada@example.com>" },
		"cc":              func(m *meaning) { m.cc = "Cé Dé <ce@example.org>" },
		"a client header": func(m *meaning) { m.extra[1] = "january" },
	}
	for name, change := range changes {
		m := base
		change(&m)
		if fp := fingerprint(env, encode(t, m, r), true); fp == first {
			t.Errorf("changing the %s kept the fingerprint", name)
		}
	}
	other := envelope{from: env.from, rcpt: []string{"bob@example.net"}}
	if fingerprint(other, encode(t, base, r), true) == first {
		t.Error("another envelope kept the fingerprint")
	}
}

// Without a key header the Message-ID is the key, and a message that
// reuses one with other content is other content; with a key header the
// Message-ID a client makes anew is not.
func TestFingerprint_MessageIDCountsOnlyWithoutAKeyHeader(t *testing.T) {
	env := envelope{from: "a@example.com", rcpt: []string{"b@example.com"}}
	msg := func(id string) []byte {
		return []byte("From: a@example.com\r\nTo: b@example.com\r\nMessage-ID: <" + id + ">\r\nSubject: s\r\n\r\nbody\r\n")
	}
	if fingerprint(env, msg("1@x"), true) != fingerprint(env, msg("2@x"), true) {
		t.Error("with a key header, a new Message-ID changed the fingerprint")
	}
	if fingerprint(env, msg("1@x"), false) == fingerprint(env, msg("2@x"), false) {
		t.Error("without a key header, the Message-ID is not covered")
	}
}

// FuzzFingerprint: whatever a client submits, the fingerprint is made
// without a panic, and the same bytes give the same fingerprint.
func FuzzFingerprint(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	f.Add(encode(&testing.T{}, baseMeaning(), r))
	f.Add([]byte("Subject: =?utf-8?B?////?=\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x--\r\n"))
	f.Add([]byte("no header at all"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env := envelope{from: "a@example.com", rcpt: []string{"b@example.com"}}
		if fingerprint(env, raw, true) != fingerprint(env, raw, true) {
			t.Fatal("the same bytes gave two fingerprints")
		}
	})
}
