package dmarcreport

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The XML shapes, matched by local name: encoding/xml ignores the
// namespace of a tag that names none, so the unqualified 1.0 schema, its
// xsi/xsd decorations and DMARC 2.0's urn:ietf:params:xml:ns:dmarc-2.0
// all read the same.
type xmlMetadata struct {
	OrgName          string `xml:"org_name"`
	Email            string `xml:"email"`
	ExtraContactInfo string `xml:"extra_contact_info"`
	ReportID         string `xml:"report_id"`
	Begin            string `xml:"date_range>begin"`
	End              string `xml:"date_range>end"`
}

type xmlPolicy struct {
	Domain string `xml:"domain"`
	ADKIM  string `xml:"adkim"`
	ASPF   string `xml:"aspf"`
	P      string `xml:"p"`
	SP     string `xml:"sp"`
	Pct    string `xml:"pct"`
}

type xmlRecord struct {
	SourceIP    string      `xml:"row>source_ip"`
	Count       string      `xml:"row>count"`
	Disposition string      `xml:"row>policy_evaluated>disposition"`
	DKIM        string      `xml:"row>policy_evaluated>dkim"`
	SPF         string      `xml:"row>policy_evaluated>spf"`
	Reasons     []xmlReason `xml:"row>policy_evaluated>reason"`
	HeaderFrom  string      `xml:"identifiers>header_from"`
	EnvFrom     string      `xml:"identifiers>envelope_from"`
	EnvTo       string      `xml:"identifiers>envelope_to"`
	DKIMResults []struct {
		Domain      string `xml:"domain"`
		Selector    string `xml:"selector"`
		Result      string `xml:"result"`
		HumanResult string `xml:"human_result"`
	} `xml:"auth_results>dkim"`
	SPFResults []struct {
		Domain string `xml:"domain"`
		Scope  string `xml:"scope"`
		Result string `xml:"result"`
	} `xml:"auth_results>spf"`
}

type xmlReason struct {
	Type    string `xml:"type"`
	Comment string `xml:"comment"`
}

// decode reads the <feedback> element token by token, so that records
// are counted as they come and the limit stops the read, and stops at
// its end (bytes after it are not read).
func decode(r io.Reader, lim Limits) (*Report, error) {
	d := xml.NewDecoder(r)
	d.Strict = false // reporters write "&" unescaped in org names
	d.CharsetReader = charsetReader
	if err := findFeedback(d); err != nil {
		return nil, err
	}
	rep := &Report{}
	var sawMeta, sawPolicy bool
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, wrapRead(err)
		}
		switch t := tok.(type) {
		case xml.EndElement: // </feedback>: the other ends are consumed by DecodeElement or Skip
			return finish(rep, sawMeta, sawPolicy)
		case xml.StartElement:
			switch t.Name.Local {
			case "report_metadata":
				var m xmlMetadata
				if err := d.DecodeElement(&m, &t); err != nil {
					return nil, wrapRead(err)
				}
				sawMeta = true
				if err := rep.metadata(m); err != nil {
					return nil, err
				}
			case "policy_published":
				var p xmlPolicy
				if err := d.DecodeElement(&p, &t); err != nil {
					return nil, wrapRead(err)
				}
				sawPolicy = true
				if err := rep.policy(p); err != nil {
					return nil, err
				}
			case "record":
				if len(rep.Records) >= lim.MaxRecords {
					return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, lim.MaxRecords)
				}
				var x xmlRecord
				if err := d.DecodeElement(&x, &t); err != nil {
					return nil, wrapRead(err)
				}
				rec, err := record(x)
				if err != nil {
					return nil, err
				}
				rep.Records = append(rep.Records, rec)
			default: // version, extensions, anything newer
				if err := d.Skip(); err != nil {
					return nil, wrapRead(err)
				}
			}
		}
	}
}

// findFeedback reads up to the root element, which must be <feedback>.
func findFeedback(d *xml.Decoder) error {
	for {
		tok, err := d.Token()
		if err != nil {
			return wrapRead(err)
		}
		if t, ok := tok.(xml.StartElement); ok {
			if t.Name.Local != "feedback" {
				return fmt.Errorf("%w: the root element is <%s>, not <feedback>", ErrFormat, clip(t.Name.Local))
			}
			return nil
		}
	}
}

func finish(rep *Report, sawMeta, sawPolicy bool) (*Report, error) {
	switch {
	case !sawMeta:
		return nil, fmt.Errorf("%w: no <report_metadata>", ErrFormat)
	case !sawPolicy:
		return nil, fmt.Errorf("%w: no <policy_published>", ErrFormat)
	}
	return rep, nil
}

func (rep *Report) metadata(m xmlMetadata) error {
	rep.OrgName, rep.Email = clean(m.OrgName), clean(m.Email)
	rep.ExtraContactInfo, rep.ReportID = clean(m.ExtraContactInfo), clean(m.ReportID)
	if rep.ReportID == "" {
		return fmt.Errorf("%w: no <report_id>", ErrFormat)
	}
	if rep.OrgName == "" && rep.Email == "" {
		return fmt.Errorf("%w: neither <org_name> nor <email>", ErrFormat)
	}
	var err error
	if rep.Begin, err = unixTime(m.Begin); err != nil {
		return fmt.Errorf("%w: <date_range><begin>: %v", ErrFormat, err)
	}
	if rep.End, err = unixTime(m.End); err != nil {
		return fmt.Errorf("%w: <date_range><end>: %v", ErrFormat, err)
	}
	if rep.End.Before(rep.Begin) {
		return fmt.Errorf("%w: the date range ends before it begins", ErrFormat)
	}
	return nil
}

func (rep *Report) policy(p xmlPolicy) error {
	rep.Policy = Policy{Domain: strings.TrimSuffix(strings.ToLower(clean(p.Domain)), "."),
		ADKIM: word(p.ADKIM), ASPF: word(p.ASPF), P: word(p.P), SP: word(p.SP), Pct: 100}
	if rep.Policy.Domain == "" || strings.ContainsAny(rep.Policy.Domain, " /@") {
		return fmt.Errorf("%w: <policy_published><domain> is missing or not a domain", ErrFormat)
	}
	if s := strings.TrimSpace(p.Pct); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("%w: <pct> is not 0 to 100", ErrFormat)
		}
		rep.Policy.Pct = n
	}
	return nil
}

func record(x xmlRecord) (Record, error) {
	ip, err := netip.ParseAddr(strings.TrimSpace(x.SourceIP))
	if err != nil {
		return Record{}, fmt.Errorf("%w: a record's <source_ip> is not an IP address", ErrFormat)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(x.Count), 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return Record{}, fmt.Errorf("%w: a record's <count> is not a count", ErrFormat)
	}
	rec := Record{SourceIP: ip.Unmap().String(), Count: n, Disposition: word(x.Disposition),
		DKIM: word(x.DKIM), SPF: word(x.SPF), HeaderFrom: lowerClean(x.HeaderFrom),
		EnvelopeFrom: lowerClean(x.EnvFrom), EnvelopeTo: lowerClean(x.EnvTo)}
	for _, r := range x.Reasons[:min(len(x.Reasons), maxAuthResults)] {
		rec.Reasons = append(rec.Reasons, Reason{Type: word(r.Type), Comment: clean(r.Comment)})
	}
	for _, d := range x.DKIMResults[:min(len(x.DKIMResults), maxAuthResults)] {
		rec.DKIMResults = append(rec.DKIMResults, DKIMResult{Domain: lowerClean(d.Domain), Selector: clean(d.Selector),
			Result: word(d.Result), HumanResult: clean(d.HumanResult)})
	}
	for _, s := range x.SPFResults[:min(len(x.SPFResults), maxAuthResults)] {
		rec.SPFResults = append(rec.SPFResults, SPFResult{Domain: lowerClean(s.Domain), Scope: word(s.Scope), Result: word(s.Result)})
	}
	return rec, nil
}

func unixTime(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return time.Time{}, fmt.Errorf("not a Unix time")
	}
	return time.Unix(n, 0).UTC(), nil
}

// clean trims a text and bounds it to maxField bytes of valid UTF-8, a
// copy: the decoded field it is cut from is not kept alive.
func clean(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxField {
		s = s[:maxField]
	}
	return strings.Clone(strings.ToValidUTF8(s, "\uFFFD"))
}

func lowerClean(s string) string { return strings.ToLower(clean(s)) }

// word is a keyword (pass, reject, r, …): lower case, bounded.
func word(s string) string {
	s = lowerClean(s)
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}

func clip(s string) string {
	if len(s) > 40 || !utf8.ValidString(s) {
		return "?"
	}
	return s
}

// charsetReader accepts the encodings reports declare: UTF-8 and ASCII
// as they are, Latin-1 (and windows-1252, read as Latin-1) byte by byte.
func charsetReader(charset string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "latin1", "latin-1", "windows-1252", "cp1252":
		return &latin1{r: in}, nil
	}
	return nil, fmt.Errorf("%w: unsupported encoding %q", ErrFormat, clip(charset))
}

// latin1 turns Latin-1 bytes into UTF-8 (each byte a rune).
type latin1 struct {
	r   io.Reader
	buf [512]byte
	out []byte
}

func (l *latin1) Read(p []byte) (int, error) {
	if len(l.out) == 0 {
		n, err := l.r.Read(l.buf[:])
		if n == 0 {
			return 0, err
		}
		l.out = l.out[:0]
		for _, b := range l.buf[:n] {
			l.out = utf8.AppendRune(l.out, rune(b))
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}
