package cli

import (
	"io"
	"testing"

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
			e := newFlags("serve", func(string) string { return "" }, io.Discard)
			var cfg Config
			serverFlags(e, &cfg)
			if err := e.fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			sc, err := cfg.serverConfig()
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
