package transport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Traffic shaping of the mx transport: how hard one destination (the mail
// exchangers of one or more recipient domains) may be pushed. The limits
// of a destination are the shaping file's default, overridden by the
// first rule that matches it (by recipient domain, else by the suffix of
// its most preferred exchanger). Replies that mean "slow down" lower a
// destination's limits for all its queued mail (SlowDownRule); clean
// deliveries raise them again. docs/deliverability.md documents the file.

// Duration is a time.Duration written as Go writes it ("90s", "5m").
type Duration time.Duration

// UnmarshalJSON reads "90s" (or a number of seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n float64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: want a string like \"90s\" or a number of seconds")
		}
		*d = Duration(n * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes it as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Limits bound one destination. A zero field takes the default's value
// (for a rule) or the built-in one (for the default).
type Limits struct {
	// MaxConnections is how many connections may be open to the
	// destination at once (in this process).
	MaxConnections int `json:"max_connections,omitempty"`
	// MaxMessagesPerConnection is how many messages one connection carries
	// before it is closed.
	MaxMessagesPerConnection int `json:"max_messages_per_connection,omitempty"`
	// MaxMessagesPerSecond bounds the rate of messages (0: no bound).
	MaxMessagesPerSecond float64 `json:"max_messages_per_second,omitempty"`
	// IdleTimeout closes a connection that waited this long for its next
	// message.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// RecoverAfter is how many clean deliveries, and RecoverInterval how
	// long since the last change, before a lowered limit goes up one step.
	RecoverAfter    int      `json:"recover_after,omitempty"`
	RecoverInterval Duration `json:"recover_interval,omitempty"`
	// TLS is the destination's TLS mode: "opportunistic" (STARTTLS when
	// offered, the default), "required" (no STARTTLS, no delivery: the
	// certificate is not checked) or "verify" (STARTTLS with a certificate
	// that verifies for the exchanger's name). MTA-STS enforce and DANE
	// can only make it stricter.
	TLS string `json:"tls,omitempty"`
}

// TLS modes of a destination (Limits.TLS).
const (
	TLSModeOpportunistic = "opportunistic"
	TLSModeRequired      = "required"
	TLSModeVerify        = "verify"
)

// ShapingRule gives the destinations it matches their own limits.
type ShapingRule struct {
	// Name names the rule; a rule of the operator's file with the name of
	// a shipped rule replaces it. With Rollup, it also names the
	// destination: every domain the rule matches is one destination (all
	// Google-hosted domains share one set of limits, as they share the
	// exchangers).
	Name string `json:"name"`
	// Domains are recipient domains (lower case) the rule applies to.
	Domains []string `json:"domains,omitempty"`
	// MXSuffix are host name suffixes ("google.com" matches
	// aspmx.l.google.com): the rule applies when the most preferred
	// exchanger ends with one.
	MXSuffix []string `json:"mx_suffix,omitempty"`
	Rollup   bool     `json:"rollup,omitempty"`
	Limits
}

// Slow-down actions.
const (
	// SlowConnections lowers the destination's connection limit to the
	// connections that were open when the reply came (at least one).
	SlowConnections = "connections"
	// SlowRate halves the destination's connections and rate and pauses
	// it for For.
	SlowRate = "rate"
	// SlowPause pauses the destination for For.
	SlowPause = "pause"
)

// SlowDownRule says which deferral replies mean "slow down".
type SlowDownRule struct {
	// Match is a regular expression (case-insensitive) matched against
	// "CODE TEXT" of a 4xx reply, e.g. "421 4.7.0 Too many connections".
	Match string `json:"match"`
	// Codes, when set, limits the rule to these reply codes.
	Codes  []int    `json:"codes,omitempty"`
	Action string   `json:"action"`
	For    Duration `json:"for,omitempty"`
	re     *regexp.Regexp
}

// Shaping is the whole shaping configuration.
type Shaping struct {
	Default  Limits         `json:"default"`
	Rules    []ShapingRule  `json:"rules,omitempty"`
	SlowDown []SlowDownRule `json:"slow_down,omitempty"`
}

//go:embed shaping_default.json
var shippedShaping []byte

// builtinLimits fill what even the default leaves zero.
var builtinLimits = Limits{
	MaxConnections: 10, MaxMessagesPerConnection: 100,
	IdleTimeout: Duration(30 * time.Second), RecoverAfter: 50, RecoverInterval: Duration(time.Minute),
}

// DefaultShaping returns the shipped shaping (shaping_default.json).
func DefaultShaping() *Shaping {
	sh, err := parseShaping(shippedShaping)
	if err != nil {
		panic("transport: shipped shaping: " + err.Error())
	}
	return sh
}

// LoadShaping reads an operator's shaping file and lays it over the
// shipped one: its default's non-zero fields override the shipped
// default, a rule with a shipped rule's name replaces it, other rules are
// tried first, and slow-down rules are added in front of the shipped ones.
func LoadShaping(path string) (*Shaping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("shaping file: %w", err)
	}
	over, err := parseShaping(b)
	if err != nil {
		return nil, fmt.Errorf("shaping file %s: %w", path, err)
	}
	return DefaultShaping().Merge(over), nil
}

func parseShaping(b []byte) (*Shaping, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a typo must not silently drop a limit
	var sh Shaping
	if err := dec.Decode(&sh); err != nil {
		return nil, err
	}
	if err := sh.compile(); err != nil {
		return nil, err
	}
	return &sh, nil
}

func (sh *Shaping) compile() error {
	for i := range sh.SlowDown {
		r := &sh.SlowDown[i]
		switch r.Action {
		case SlowConnections, SlowRate, SlowPause:
		default:
			return fmt.Errorf("slow_down[%d]: action %q: want connections, rate or pause", i, r.Action)
		}
		re, err := regexp.Compile("(?i)" + r.Match)
		if err != nil {
			return fmt.Errorf("slow_down[%d]: %w", i, err)
		}
		r.re = re
	}
	for i, r := range sh.Rules {
		if r.Name == "" || (len(r.Domains) == 0 && len(r.MXSuffix) == 0) {
			return fmt.Errorf("rules[%d]: a rule needs a name and domains or mx_suffix", i)
		}
		if err := r.Limits.check(); err != nil {
			return fmt.Errorf("rules[%d] (%s): %w", i, r.Name, err)
		}
	}
	return sh.Default.check()
}

func (l Limits) check() error {
	if l.MaxConnections < 0 || l.MaxMessagesPerConnection < 0 || l.MaxMessagesPerSecond < 0 || l.RecoverAfter < 0 || l.IdleTimeout < 0 || l.RecoverInterval < 0 {
		return errors.New("limits must not be negative")
	}
	switch l.TLS {
	case "", TLSModeOpportunistic, TLSModeRequired, TLSModeVerify:
		return nil
	}
	return fmt.Errorf("tls %q: want opportunistic, required or verify", l.TLS)
}

// Merge returns sh with over laid on it (see LoadShaping).
func (sh *Shaping) Merge(over *Shaping) *Shaping {
	out := &Shaping{Default: over.Default.or(sh.Default)}
	var shipped []ShapingRule
	for _, r := range sh.Rules {
		if !slices.ContainsFunc(over.Rules, func(o ShapingRule) bool { return o.Name == r.Name }) {
			shipped = append(shipped, r)
		}
	}
	out.Rules = append(slices.Clone(over.Rules), shipped...)
	out.SlowDown = append(slices.Clone(over.SlowDown), sh.SlowDown...)
	return out
}

// or returns l with its zero fields taken from base.
func (l Limits) or(base Limits) Limits {
	if l.MaxConnections == 0 {
		l.MaxConnections = base.MaxConnections
	}
	if l.MaxMessagesPerConnection == 0 {
		l.MaxMessagesPerConnection = base.MaxMessagesPerConnection
	}
	if l.MaxMessagesPerSecond == 0 {
		l.MaxMessagesPerSecond = base.MaxMessagesPerSecond
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = base.IdleTimeout
	}
	if l.RecoverAfter == 0 {
		l.RecoverAfter = base.RecoverAfter
	}
	if l.RecoverInterval == 0 {
		l.RecoverInterval = base.RecoverInterval
	}
	if l.TLS == "" {
		l.TLS = base.TLS
	}
	return l
}

// limitsFor returns the limits of a destination and the name it is
// rolled up under ("" for none): the first rule matching one of its
// domains, else the first matching its most preferred exchanger.
func (sh *Shaping) limitsFor(domains []string, primaryMX string) (Limits, string, string) {
	def := sh.Default.or(builtinLimits)
	for _, r := range sh.Rules {
		for _, d := range domains {
			if slices.Contains(r.Domains, d) {
				return r.Limits.or(def), r.Name, rollupName(r)
			}
		}
	}
	for _, r := range sh.Rules {
		for _, suf := range r.MXSuffix {
			suf = strings.ToLower(strings.TrimPrefix(suf, "."))
			if primaryMX == suf || strings.HasSuffix(primaryMX, "."+suf) {
				return r.Limits.or(def), r.Name, rollupName(r)
			}
		}
	}
	return def, "default", ""
}

func rollupName(r ShapingRule) string {
	if r.Rollup {
		return "site:" + r.Name
	}
	return ""
}

// slowDown returns the rule a deferral reply matches, if any.
func (sh *Shaping) slowDown(code int, text string) *SlowDownRule {
	if code/100 != 4 {
		return nil
	}
	line := fmt.Sprintf("%d %s", code, text)
	for i := range sh.SlowDown {
		r := &sh.SlowDown[i]
		if len(r.Codes) > 0 && !slices.Contains(r.Codes, code) {
			continue
		}
		if r.re.MatchString(line) {
			return r
		}
	}
	return nil
}
