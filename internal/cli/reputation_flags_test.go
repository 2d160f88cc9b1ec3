package cli

import (
	"io"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
)

// The reputation guard's flags reach the server's config, with their
// defaults and their environment variables; a rate outside (0, 1] or a
// minimum below 1 is refused before anything starts.
func TestServeFlags_Reputation(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want app.ReputationThresholds
		bad  bool
	}{
		{name: "defaults", want: app.ReputationThresholds{ComplaintRate: 0.003, BounceRate: 0.05, MinSends: 500}},
		{name: "flags", args: []string{"--pause-complaint-rate", "0.01", "--pause-bounce-rate", "0.1", "--pause-min-sends", "7"},
			want: app.ReputationThresholds{ComplaintRate: 0.01, BounceRate: 0.1, MinSends: 7}},
		{name: "env", env: map[string]string{"SENDONCE_PAUSE_MIN_SENDS": "9", "SENDONCE_PAUSE_BOUNCE_RATE": "0.2"},
			want: app.ReputationThresholds{ComplaintRate: 0.003, BounceRate: 0.2, MinSends: 9}},
		{name: "zero rate", args: []string{"--pause-complaint-rate", "0"}, bad: true},
		{name: "rate over 1", args: []string{"--pause-bounce-rate", "1.5"}, bad: true},
		{name: "no minimum", args: []string{"--pause-min-sends", "0"}, bad: true},
		{name: "NaN", args: []string{"--pause-complaint-rate", "NaN"}, bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFlags("serve", func(k string) string { return c.env[k] }, io.Discard)
			var cfg Config
			serverFlags(e, &cfg)
			if err := e.fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.validate()
			if c.bad {
				if err == nil {
					t.Fatalf("%v: accepted, want refused", c.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc, _, err := cfg.serverConfig()
			if err != nil {
				t.Fatal(err)
			}
			if sc.Reputation != c.want {
				t.Errorf("Reputation = %+v, want %+v", sc.Reputation, c.want)
			}
		})
	}
}
