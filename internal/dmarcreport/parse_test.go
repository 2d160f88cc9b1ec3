package dmarcreport_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/dmarcreport"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zipped is a zip of the given name/content pairs, in order.
func zipped(t testing.TB, files ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		f, err := w.Create(files[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(files[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParse_RealWorldShapes: the four reporters' shapes, each in the
// packaging that reporter uses, read to the same fields.
func TestParse_RealWorldShapes(t *testing.T) {
	cases := []struct {
		name, file, pack string
		org, email, id   string
		extra            string
		records          int
		p, sp            string
		pct              int
		messages, pass   int64
	}{
		{"Google, zip", "google.xml", "zip", "google.com", "noreply-dmarc-support@google.com", "4021937546103257813",
			"https://support.google.com/a/answer/2466580", 2, "none", "none", 100, 15, 12},
		{"Outlook.com, gzip with xsi/xsd and several dkim", "outlook.xml", "gzip", "Enterprise Outlook", "dmarcreport@microsoft.com",
			"6c1f0ad2b4e54f0c9a3f2d8e71b5a6c4", "", 2, "quarantine", "quarantine", 100, 7, 5},
		{"Yahoo, gzip with trailing bytes, empty sp, no pct", "yahoo.xml", "gzip+trailing", "Yahoo", "dmarchelp@yahooinc.com",
			"1764979200.811212", "", 1, "none", "", 100, 7, 7},
		{"Mimecast style, DMARC 2.0 namespace, reasons", "mimecast.xml", "xml", "Mimecast Ltd & Co", "dmarc-reports@mimecast.example",
			"b7e1c0f2-3d4a-4c2e-9f11-7a0c5e8d2b61", "mailto:dmarc-help@mimecast.example", 1, "reject", "", 100, 4, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := read(t, c.file)
			switch c.pack {
			case "zip":
				data = zipped(t, "google.com!example.com!1764892800!1764979199.xml", string(data))
			case "gzip":
				data = gz(t, data)
			case "gzip+trailing":
				data = append(gz(t, data), "\x00\x00garbage after the member\r\n"...)
			}
			rep, err := dmarcreport.Parse(data, dmarcreport.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OrgName != c.org || rep.Email != c.email || rep.ReportID != c.id || rep.ExtraContactInfo != c.extra {
				t.Fatalf("metadata: %+v", rep)
			}
			if rep.Policy.Domain != "example.com" || rep.Policy.P != c.p || rep.Policy.SP != c.sp || rep.Policy.Pct != c.pct {
				t.Fatalf("policy: %+v", rep.Policy)
			}
			if rep.Begin.Unix() != 1764892800 || rep.End.Before(rep.Begin) {
				t.Fatalf("period: %v to %v", rep.Begin, rep.End)
			}
			if len(rep.Records) != c.records {
				t.Fatalf("%d records, want %d", len(rep.Records), c.records)
			}
			if m, p, f := rep.Totals(); m != c.messages || p != c.pass || f != m-p {
				t.Fatalf("totals %d/%d/%d, want %d messages, %d pass", m, p, f, c.messages, c.pass)
			}
		})
	}
}

// TestParse_RecordDetails: several dkim results, reasons, optional
// elements missing, an IPv6 source.
func TestParse_RecordDetails(t *testing.T) {
	out, err := dmarcreport.Parse(gz(t, read(t, "outlook.xml")), dmarcreport.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Records[0]
	if r.SourceIP != "192.0.2.10" || r.Count != 5 || r.DKIM != "pass" || r.SPF != "fail" || !r.Pass() ||
		len(r.DKIMResults) != 2 || r.DKIMResults[1].Domain != "esp.example.org" || r.SPFResults[0].Scope != "mfrom" ||
		r.EnvelopeTo != "outlook.com" || r.EnvelopeFrom != "bounces.example.com" {
		t.Fatalf("outlook record: %+v", r)
	}
	if r := out.Records[1]; r.Disposition != "quarantine" || r.Pass() {
		t.Fatalf("outlook failing record: %+v", r)
	}
	mc, err := dmarcreport.Parse(read(t, "mimecast.xml"), dmarcreport.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r = mc.Records[0]
	if len(r.Reasons) != 2 || r.Reasons[0].Type != "forwarded" || r.Reasons[0].Comment != "arc=pass as.1.example.net" ||
		r.Reasons[1].Type != "local_policy" || r.DKIMResults[0].Selector != "" || r.DKIMResults[0].HumanResult == "" || r.Pass() {
		t.Fatalf("mimecast record: %+v", r)
	}
	g, err := dmarcreport.Parse(read(t, "google.xml"), dmarcreport.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Records[1].SourceIP != "2001:db8::25" || g.Records[1].EnvelopeFrom != "" || len(g.Records[1].DKIMResults) != 0 {
		t.Fatalf("google record: %+v", g.Records[1])
	}
}

// TestParse_ZipTakesFirstXMLEntry: a zip may carry other files first.
func TestParse_ZipTakesFirstXMLEntry(t *testing.T) {
	data := zipped(t, "README.txt", "not a report", "report.XML", string(read(t, "yahoo.xml")), "second.xml", "<x/>")
	rep, err := dmarcreport.Parse(data, dmarcreport.Limits{})
	if err != nil || rep.OrgName != "Yahoo" {
		t.Fatalf("Parse: %v %+v", err, rep)
	}
	if _, err := dmarcreport.Parse(zipped(t, "README.txt", "no xml"), dmarcreport.Limits{}); !errors.Is(err, dmarcreport.ErrFormat) {
		t.Fatalf("zip without xml: %v", err)
	}
}

// TestParse_Refusals: what is not a complete report is an error of its
// class, never a partial report.
func TestParse_Refusals(t *testing.T) {
	full := string(read(t, "google.xml"))
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, dmarcreport.ErrFormat},
		{"html", []byte("<html><body>hi</body></html>"), dmarcreport.ErrFormat},
		{"truncated", []byte(full[:len(full)/2]), dmarcreport.ErrFormat},
		{"no report_id", []byte(strings.Replace(full, "<report_id>4021937546103257813</report_id>", "", 1)), dmarcreport.ErrFormat},
		{"no domain", []byte(strings.Replace(full, "<domain>example.com</domain>", "", 1)), dmarcreport.ErrFormat},
		{"bad ip", []byte(strings.Replace(full, "192.0.2.10", "not-an-ip", 1)), dmarcreport.ErrFormat},
		{"bad count", []byte(strings.Replace(full, "<count>12</count>", "<count>-1</count>", 1)), dmarcreport.ErrFormat},
		{"broken gzip", gz(t, []byte(full))[:40], dmarcreport.ErrFormat},
		{"input past the cap", bytes.Repeat([]byte(" "), dmarcreport.DefaultMaxInput+1), dmarcreport.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := dmarcreport.Parse(c.data, dmarcreport.Limits{})
			if !errors.Is(err, c.want) || rep != nil {
				t.Fatalf("Parse: %v, %v; want %v", rep, err, c.want)
			}
		})
	}
}

// TestParse_RecordCap: more records than the cap is refused.
func TestParse_RecordCap(t *testing.T) {
	full := string(read(t, "google.xml"))
	i, j := strings.Index(full, "<record>"), strings.Index(full, "</record>")+len("</record>")
	many := full[:i] + strings.Repeat(full[i:j], 11) + full[j:]
	if _, err := dmarcreport.Parse([]byte(many), dmarcreport.Limits{MaxRecords: 10}); !errors.Is(err, dmarcreport.ErrTooManyRecords) {
		t.Fatalf("12 records, cap 10: %v", err)
	}
	// 11 copies of the first record and the second.
	if rep, err := dmarcreport.Parse([]byte(many), dmarcreport.Limits{MaxRecords: 12}); err != nil || len(rep.Records) != 12 {
		t.Fatalf("12 records, cap 12: %v", err)
	}
}

// bombXML is a report whose org_name is n bytes of "a".
func bombXML(n int) []byte {
	return []byte("<feedback><report_metadata><org_name>" + strings.Repeat("a", n) + "</org_name></report_metadata></feedback>")
}

// TestParse_SizeCapsOnWhatIsRead: XML past MaxXML made of small tokens
// (the total cap), and one text past 64 KiB (the token cap), are
// ErrTooLarge; a report just under both parses.
func TestParse_SizeCapsOnWhatIsRead(t *testing.T) {
	full := string(read(t, "google.xml"))
	i := strings.Index(full, "<record>")
	pad := func(n int) string {
		return full[:i] + "<extension>" + strings.Repeat("<x/>"+strings.Repeat(" ", 1000), n) + "</extension>" + full[i:]
	}
	lim := dmarcreport.Limits{MaxXML: 256 << 10}
	if _, err := dmarcreport.Parse(gz(t, []byte(pad(300))), lim); !errors.Is(err, dmarcreport.ErrTooLarge) {
		t.Fatalf("300 KB of XML, cap 256 KiB: %v", err)
	}
	if _, err := dmarcreport.Parse(gz(t, []byte(pad(200))), lim); err != nil {
		t.Fatalf("200 KB of XML, cap 256 KiB: %v", err)
	}
	for _, n := range []int{65 << 10, 64<<10 + 1} {
		if _, err := dmarcreport.Parse(gz(t, bombXML(n)), dmarcreport.Limits{}); !errors.Is(err, dmarcreport.ErrTooLarge) {
			t.Fatalf("a %d-byte org_name: %v", n, err)
		}
		if _, err := dmarcreport.Parse(bombXML(n), dmarcreport.Limits{}); !errors.Is(err, dmarcreport.ErrTooLarge) {
			t.Fatalf("a %d-byte org_name, plain: %v", n, err)
		}
	}
}

// TestParse_BombsAreRefusedWithoutExpanding: a gzip stream and a zip entry
// (declaring its true size, or lying small) that expand past MaxXML are
// refused after reading about MaxXML, whatever they would expand to.
func TestParse_BombsAreRefusedWithoutExpanding(t *testing.T) {
	const expands = 8 << 20
	lim := dmarcreport.Limits{MaxXML: 256 << 10}
	// Small tokens: the bytes read, not a token's length, stop it.
	body := []byte("<feedback><extension>" + strings.Repeat("<x/>"+strings.Repeat(" ", 4000), expands/4004) + "</extension></feedback>")
	var deflated bytes.Buffer
	fw, _ := flate.NewWriter(&deflated, flate.BestCompression)
	fw.Write(body)
	fw.Close()
	lying := func(declared uint64) []byte {
		var b bytes.Buffer
		w := zip.NewWriter(&b)
		f, err := w.CreateRaw(&zip.FileHeader{Name: "bomb.xml", Method: zip.Deflate,
			CompressedSize64: uint64(deflated.Len()), UncompressedSize64: declared})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(deflated.Bytes())
		w.Close()
		return b.Bytes()
	}
	bombs := map[string][]byte{"gzip": gz(t, body), "zip, true size": lying(uint64(len(body))),
		"zip, declared small": lying(1000), "zip, declared at the cap": lying(uint64(lim.MaxXML))}
	// Refused by the cap on what is read, or the declared size: never
	// read to the end.
	tooLarge := map[string]bool{"gzip": true, "zip, true size": true}
	for name, data := range bombs {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := dmarcreport.Parse(data, lim)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("a bomb parsed")
			}
			if !errors.Is(err, dmarcreport.ErrTooLarge) && (tooLarge[name] || !errors.Is(err, dmarcreport.ErrFormat)) {
				t.Fatalf("error %v, want ErrTooLarge", err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 8*uint64(lim.MaxXML) {
				t.Fatalf("allocated %d KiB for a %d KiB cap (the bomb expands to %d MiB)", got>>10, lim.MaxXML>>10, expands>>20)
			}
		})
	}
}

// FuzzParse: any bytes parse or fail with an error of a class, without a
// panic, and a parsed report is within the limits. Seeds: the four
// reporters' shapes, plain, gzip'd and zipped.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"google.xml", "outlook.xml", "yahoo.xml", "mimecast.xml"} {
		x := read(f, name)
		f.Add(x)
		f.Add(gz(f, x))
		f.Add(zipped(f, name, string(x)))
	}
	f.Add([]byte("<feedback><record><row><source_ip>::1</source_ip></row></record></feedback>"))
	lim := dmarcreport.Limits{MaxInput: 1 << 20, MaxXML: 1 << 20, MaxRecords: 50}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := dmarcreport.Parse(data, lim)
		if err != nil {
			if !errors.Is(err, dmarcreport.ErrFormat) && !errors.Is(err, dmarcreport.ErrTooLarge) && !errors.Is(err, dmarcreport.ErrTooManyRecords) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		if len(rep.Records) > lim.MaxRecords || rep.ReportID == "" || rep.Policy.Domain == "" {
			t.Fatalf("parsed past the rules: %+v", rep)
		}
	})
}
