package dsn

import (
	"bytes"
	"errors"
	"io"
	"net/mail"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func parseFile(t testing.TB, name string) (*Report, error) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	// The fixtures are written with LF; mail arrives with CRLF.
	raw = bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
	return Parse(bytes.NewReader(raw))
}

func TestParse_Fixtures(t *testing.T) {
	for _, tc := range []struct {
		file, msgID, envID string
		rcpts              []Recipient
	}{
		{"postfix.eml", "<orig-1@sender.test>", "", []Recipient{{FinalRecipient: "nobody@rcpt.test", OriginalRecipient: "nobody@rcpt.test",
			Action: "failed", Status: "5.1.1", RemoteMTA: "mx.rcpt.test",
			DiagnosticCode: "smtp; 550 5.1.1 <nobody@rcpt.test>: Recipient address rejected: User unknown in local recipient table"}}},
		// Exim says 5.0.0 in Status and the telling code in the diagnostic:
		// Status is what it says.
		{"exim.eml", "<orig-2@sender.test>", "", []Recipient{{FinalRecipient: "gone@rcpt.test", Action: "failed", Status: "5.0.0",
			RemoteMTA: "mail.rcpt.test", DiagnosticCode: "smtp; 550 5.1.2 Unrouteable address"}}},
		{"multi.eml", "<orig-3@sender.test>", "env-42", []Recipient{
			{FinalRecipient: "a@one.test", OriginalRecipient: "a@one.test", Action: "failed", Status: "5.1.1", DiagnosticCode: "smtp; 550 5.1.1 no such user"},
			{FinalRecipient: "b@two.test", Action: "failed", Status: "5.2.2", DiagnosticCode: "smtp; 552 5.2.2 mailbox full"},
			{FinalRecipient: "c@three.test", Action: "delivered", Status: "2.0.0"},
		}},
		{"delayed.eml", "<orig-4@sender.test>", "", []Recipient{{FinalRecipient: "slow@rcpt.test", Action: "delayed", Status: "4.4.1",
			DiagnosticCode: "X-Postfix; connect to mx.rcpt.test[192.0.2.30]:25: Connection timed out"}}},
		{"delivered.eml", "<orig-5@sender.test>", "", []Recipient{{FinalRecipient: "happy@rcpt.test", OriginalRecipient: "happy@rcpt.test",
			Action: "delivered", Status: "2.0.0", RemoteMTA: "mx.rcpt.test", DiagnosticCode: "smtp; 250 2.0.0 Ok: queued as 1234"}}},
		{"8bit.eml", "<orig-6@sender.test>", "", []Recipient{{FinalRecipient: "jürgen@rcpt.test", OriginalRecipient: "juergen@rcpt.test",
			Action: "failed", Status: "5.1.10", DiagnosticCode: "smtp; 550 5.1.10 Empfänger unbekannt (null MX)"}}},
		{"noenvid.eml", "", "", []Recipient{{FinalRecipient: "Who@Rcpt.Test", Action: "failed", Status: "5.7.1",
			DiagnosticCode: "smtp; 554 5.7.1 Message rejected by policy"}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep, err := parseFile(t, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Kind != KindDSN || rep.Feedback != nil {
				t.Fatalf("kind %q feedback %v", rep.Kind, rep.Feedback)
			}
			if rep.OriginalMessageID != tc.msgID || rep.OriginalEnvelopeID != tc.envID {
				t.Errorf("message id %q envelope id %q; want %q %q", rep.OriginalMessageID, rep.OriginalEnvelopeID, tc.msgID, tc.envID)
			}
			if !reflect.DeepEqual(rep.Recipients, tc.rcpts) {
				t.Errorf("recipients\n got %+v\nwant %+v", rep.Recipients, tc.rcpts)
			}
			if len(rep.Digest) != 64 {
				t.Errorf("digest %q", rep.Digest)
			}
		})
	}
}

func TestParse_ARF(t *testing.T) {
	rep, err := parseFile(t, "arf.eml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Feedback{Type: "abuse", UserAgent: "SomeGenerator/1.0", OriginalMailFrom: "bounce+token@bounces.sender.test",
		OriginalRcptTo: []string{"angry@isp.test"}, OriginalTo: []string{"angry@isp.test"}}
	if rep.Kind != KindARF || !reflect.DeepEqual(rep.Feedback, want) || rep.OriginalMessageID != "<orig-7@sender.test>" {
		t.Fatalf("got kind %q feedback %+v message id %q", rep.Kind, rep.Feedback, rep.OriginalMessageID)
	}
}

func TestParse_NotAReport(t *testing.T) {
	if _, err := parseFile(t, "notreport.eml"); !errors.Is(err, ErrNotReport) {
		t.Fatalf("plain mail: %v, want ErrNotReport", err)
	}
	multipart := "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b--\r\n"
	if _, err := Parse(strings.NewReader(multipart)); !errors.Is(err, ErrNotReport) {
		t.Fatalf("multipart without a report: %v, want ErrNotReport", err)
	}
}

func TestParse_Broken(t *testing.T) {
	for name, raw := range map[string]string{
		"no recipients": "Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; x\r\n--b--\r\n",
		"two reports": "Content-Type: multipart/report; boundary=b\r\n\r\n--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n" +
			"--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n--b--\r\n",
		"arf without type": "Content-Type: multipart/report; boundary=b\r\n\r\n--b\r\nContent-Type: message/feedback-report\r\n\r\nVersion: 1\r\n--b--\r\n",
	} {
		if rep, err := Parse(strings.NewReader(raw)); err == nil || errors.Is(err, ErrNotReport) {
			t.Errorf("%s: %+v, %v; want a parse error", name, rep, err)
		}
	}
}

func TestDigest_SameReportSameDigest(t *testing.T) {
	a, err := parseFile(t, "postfix.eml")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join("testdata", "postfix.eml")) // LF line ends this time
	b, err := Parse(bytes.NewReader(append([]byte("Received: by another.hop\n"), raw...)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatal("the same report through another hop has another digest")
	}
	c, err := parseFile(t, "exim.eml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest == a.Digest {
		t.Fatal("two reports share a digest")
	}
}

// FuzzParse: whatever comes in, Parse returns a report or an error without
// panicking, and a report always has a kind, a digest, and for a DSN at
// least one recipient.
func FuzzParse(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.eml"))
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rep, err := Parse(bytes.NewReader(raw))
		if err != nil {
			return
		}
		if rep.Kind == "" || len(rep.Digest) != 64 {
			t.Fatalf("report without kind or digest: %+v", rep)
		}
		if rep.Kind == KindDSN && len(rep.Recipients) == 0 {
			t.Fatal("a DSN without recipients")
		}
		if rep.Kind == KindARF && rep.Feedback == nil {
			t.Fatal("a feedback report without its fields")
		}
	})
}

func BenchmarkParse(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "postfix.eml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkYardstick_ReadMessage reads the same fixture with net/mail and
// its body to the end: the yardstick BenchmarkParse is compared against
// (docs/deliverability.md).
func BenchmarkYardstick_ReadMessage(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "postfix.eml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, m.Body); err != nil {
			b.Fatal(err)
		}
	}
}
