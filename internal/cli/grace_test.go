package cli

import (
	"testing"
	"time"
)

// The shutdown grace follows a larger --attempt-lease unless it is set:
// an attempt may run for up to its lease, and one cut after DATA began
// ends unknown.
func TestShutdownGrace_FollowsTheAttemptLeaseUnlessSet(t *testing.T) {
	for _, c := range []struct {
		lease, grace, want time.Duration
	}{
		{lease: 30 * time.Second, want: 30 * time.Second},
		{lease: 10 * time.Second, want: defaultShutdownGrace},
		{lease: 2 * time.Minute, want: 2 * time.Minute},
		{lease: 2 * time.Minute, grace: 40 * time.Second, want: 40 * time.Second},
	} {
		cfg := Config{ShutdownGrace: c.grace}
		cfg.Server.AttemptLease = c.lease
		if got := cfg.shutdownGrace(); got != c.want {
			t.Errorf("lease %v, --shutdown-grace %v: grace %v, want %v", c.lease, c.grace, got, c.want)
		}
	}
}

// The flag and its environment variable reach the setting.
func TestShutdownGrace_FlagAndEnv(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{want: 0},
		{args: []string{"--shutdown-grace", "45s"}, want: 45 * time.Second},
		{env: "50s", want: 50 * time.Second},
	} {
		cfg := serveFlagsFrom(t, map[string]string{"SENDONCE_SHUTDOWN_GRACE": c.env}, c.args...)
		if cfg.ShutdownGrace != c.want {
			t.Errorf("args %v env %q: %v, want %v", c.args, c.env, cfg.ShutdownGrace, c.want)
		}
	}
}
