package cli

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// The serve flags that are the CLI's own reach the server in its terms:
// the role says whether this process works, --replay-cache 0 turns the
// cache off (the server's 0 would be its default), and one message limit
// holds for HTTP and SMTP alike.
func TestServerConfig_MapsTheCLIFlags(t *testing.T) {
	const dflt = idempotency.DefaultReplayCacheEntries
	for _, c := range []struct {
		name               string
		args               []string
		work               bool
		replay             int
		msgBytes, reqBytes int64
		maxTemplates       int
		attachmentFetch    bool
	}{
		{name: "defaults", work: true, replay: dflt},
		{name: "api role", args: []string{"--role", "api"}, work: false, replay: dflt},
		{name: "worker role", args: []string{"--role", "worker"}, work: true, replay: dflt},
		{name: "cache off", args: []string{"--replay-cache", "0"}, work: true, replay: -1},
		{name: "cache size", args: []string{"--replay-cache", "7"}, work: true, replay: 7},
		{name: "sizes", args: []string{"--max-message-size", "1234", "--max-request-size", "5678"}, work: true, replay: dflt, msgBytes: 1234, reqBytes: 5678},
		{name: "caps and fetch", args: []string{"--max-templates", "3", "--attachment-fetch"}, work: true, replay: dflt, maxTemplates: 3, attachmentFetch: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := serveFlagsFrom(t, nil, c.args...)
			sc, _, err := cfg.serverConfig()
			if err != nil {
				t.Fatal(err)
			}
			if sc.Work != c.work {
				t.Errorf("Work = %v, want %v", sc.Work, c.work)
			}
			if sc.ReplayCache != c.replay {
				t.Errorf("ReplayCache = %d, want %d", sc.ReplayCache, c.replay)
			}
			if c.msgBytes != 0 && (sc.MaxMessageBytes != c.msgBytes || sc.SMTP.MaxMessageBytes != c.msgBytes) {
				t.Errorf("MaxMessageBytes = %d, SMTP %d, want both %d", sc.MaxMessageBytes, sc.SMTP.MaxMessageBytes, c.msgBytes)
			}
			if sc.MaxMessageBytes != sc.SMTP.MaxMessageBytes {
				t.Errorf("HTTP message limit %d, SMTP %d: want one limit", sc.MaxMessageBytes, sc.SMTP.MaxMessageBytes)
			}
			if c.reqBytes != 0 && sc.MaxRequestBytes != c.reqBytes {
				t.Errorf("MaxRequestBytes = %d, want %d", sc.MaxRequestBytes, c.reqBytes)
			}
			if c.maxTemplates != 0 && sc.Caps[core.ResourceTemplates] != c.maxTemplates {
				t.Errorf("template cap = %d, want %d", sc.Caps[core.ResourceTemplates], c.maxTemplates)
			}
			if sc.AttachmentFetch != c.attachmentFetch {
				t.Errorf("AttachmentFetch = %v, want %v", sc.AttachmentFetch, c.attachmentFetch)
			}
		})
	}
}

// The mx flags: defaults as the contract's section 14 gives them, the
// environment read, the flag winning, --egress-source repeatable.
func TestServeFlags_MX(t *testing.T) {
	sc := serveFlagsFrom(t, nil).Server
	if sc.MXPort != "25" || sc.MaxQueueLifetime != 120*time.Hour || sc.MaxRetryDelay != time.Hour || sc.HELOName != "localhost" || len(sc.EgressSources) != 0 || sc.TLSCA != "" {
		t.Errorf("defaults: port %q lifetime %v max delay %v helo %q sources %v ca %q", sc.MXPort, sc.MaxQueueLifetime, sc.MaxRetryDelay, sc.HELOName, sc.EgressSources, sc.TLSCA)
	}
	env := map[string]string{"SENDONCE_MX_PORT": "2525", "SENDONCE_MAX_QUEUE_LIFETIME": "72h", "SENDONCE_MAX_RETRY_DELAY": "30m",
		"SENDONCE_HELO_NAME": "mta.example.com", "SENDONCE_TLS_CA": "/ca.pem", "SENDONCE_EGRESS_SOURCE": "a=192.0.2.1 b=192.0.2.2,ehlo=b.example.com"}
	sc = serveFlagsFrom(t, env).Server
	if sc.MXPort != "2525" || sc.MaxQueueLifetime != 72*time.Hour || sc.MaxRetryDelay != 30*time.Minute || sc.HELOName != "mta.example.com" || sc.TLSCA != "/ca.pem" ||
		!slices.Equal(sc.EgressSources, []string{"a=192.0.2.1", "b=192.0.2.2,ehlo=b.example.com"}) {
		t.Errorf("environment: %+v", sc)
	}
	sc = serveFlagsFrom(t, env, "--mx-port", "2626", "--egress-source", "c=192.0.2.3", "--egress-source", "d=192.0.2.4").Server
	if sc.MXPort != "2626" || !slices.Equal(sc.EgressSources, []string{"c=192.0.2.3", "d=192.0.2.4"}) {
		t.Errorf("flags over the environment: port %q sources %v", sc.MXPort, sc.EgressSources)
	}
}

// serveFlagsFrom parses serve's flags from args with the environment env,
// failing the test on a flag or variable that does not parse.
func serveFlagsFrom(t *testing.T, env map[string]string, args ...string) Config {
	t.Helper()
	e := newFlags("serve", func(k string) string { return env[k] }, io.Discard)
	var cfg Config
	serverFlags(e, &cfg)
	if err := e.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := e.err(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
