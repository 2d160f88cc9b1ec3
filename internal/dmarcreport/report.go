package dmarcreport

import (
	"errors"
	"time"

	"github.com/sendonce/sendonce/internal/defaults"
)

// Limits bound one report; a zero field is its default.
type Limits struct {
	// MaxInput bounds the attachment as it arrives (compressed or not);
	// default DefaultMaxInput.
	MaxInput int64
	// MaxXML bounds the XML bytes read after decompression; default
	// DefaultMaxXML.
	MaxXML int64
	// MaxRecords bounds the <record> elements; default DefaultMaxRecords.
	MaxRecords int
}

// Defaults: a large mailbox provider's daily report for a busy sender is
// a few hundred KiB of XML and a few thousand records.
const (
	DefaultMaxInput   = 4 << 20
	DefaultMaxXML     = 8 << 20
	DefaultMaxRecords = 10000
	// maxAuthResults bounds the <dkim> and <spf> results kept per record
	// and the <reason> entries: real reports carry one to three.
	maxAuthResults = 16
	// maxField bounds each text kept: names, comments, addresses.
	maxField = 512
)

func (l Limits) withDefaults() Limits {
	defaults.Set(&l.MaxInput, DefaultMaxInput)
	defaults.Set(&l.MaxXML, DefaultMaxXML)
	defaults.Set(&l.MaxRecords, DefaultMaxRecords)
	return l
}

// Errors, by class: a report is refused whole, never half-read.
var (
	// ErrTooLarge: the input, or the XML it expands to, is past Limits.
	ErrTooLarge = errors.New("dmarc report: larger than the limit")
	// ErrTooManyRecords: more <record> elements than Limits.MaxRecords.
	ErrTooManyRecords = errors.New("dmarc report: more records than the limit")
	// ErrFormat: not an aggregate report (not XML, gzip or zip; no
	// <feedback>; a required element missing or malformed).
	ErrFormat = errors.New("dmarc report: not an aggregate report")
)

// Report is one aggregate report.
type Report struct {
	OrgName          string
	Email            string
	ExtraContactInfo string
	ReportID         string
	Begin, End       time.Time
	Policy           Policy
	Records          []Record
}

// Policy is the <policy_published> the reporter saw.
type Policy struct {
	Domain string // lower case
	ADKIM  string // "r" or "s"; "" when absent
	ASPF   string
	P      string
	SP     string // "" when absent or empty
	Pct    int    // 100 when absent (RFC 7489 6.3)
}

// Record is one <record>: a source IP and what came from it.
type Record struct {
	SourceIP    string
	Count       int64
	Disposition string // none, quarantine, reject
	// DKIM and SPF are policy_evaluated's: the DMARC-aligned results.
	DKIM, SPF    string
	Reasons      []Reason
	HeaderFrom   string
	EnvelopeFrom string
	EnvelopeTo   string
	DKIMResults  []DKIMResult
	SPFResults   []SPFResult
}

// Pass reports whether the record passed DMARC: DKIM or SPF aligned and
// passing (RFC 7489 section 4.2).
func (r Record) Pass() bool { return r.DKIM == "pass" || r.SPF == "pass" }

// Reason is a <policy_evaluated><reason>: why the disposition differs
// from the policy (forwarded, local_policy, mailing_list, …).
type Reason struct {
	Type    string `json:"type"`
	Comment string `json:"comment,omitempty"`
}

// DKIMResult is one <auth_results><dkim>.
type DKIMResult struct {
	Domain      string `json:"domain"`
	Selector    string `json:"selector,omitempty"`
	Result      string `json:"result"`
	HumanResult string `json:"human_result,omitempty"`
}

// SPFResult is one <auth_results><spf>.
type SPFResult struct {
	Domain string `json:"domain"`
	Scope  string `json:"scope,omitempty"`
	Result string `json:"result"`
}

// Totals are a report's messages, and how many passed and failed.
func (r *Report) Totals() (messages, pass, fail int64) {
	for _, rec := range r.Records {
		messages += rec.Count
		if rec.Pass() {
			pass += rec.Count
		} else {
			fail += rec.Count
		}
	}
	return messages, pass, fail
}
