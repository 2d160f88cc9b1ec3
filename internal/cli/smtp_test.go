package cli_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
)

// TestServe_SMTPSettingsAreChecked: SMTP settings that cannot work are a
// usage error before anything starts, whether they come from flags or
// from the environment.
func TestServe_SMTPSettingsAreChecked(t *testing.T) {
	db := sqliteDSN(t)
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--smtps-addr", "127.0.0.1:0"}, "--smtps-addr"},
		{nil, []string{"--smtp-tls-cert", "cert.pem"}, "go together"},
		{map[string]string{"SENDONCE_SMTP_TLS_KEY": "key.pem"}, nil, "go together"},
		{nil, []string{"--max-message-size", "10"}, "--max-message-size"},
		{map[string]string{"SENDONCE_SMTP_MAX_SESSIONS": "0"}, nil, "--smtp-max-sessions"},
		{nil, []string{"--smtp-tls-cert", "missing.pem", "--smtp-tls-key", "missing.key"}, "--smtp-tls-cert"},
	} {
		env := map[string]string{"SENDONCE_DB": db}
		for k, v := range c.env {
			env[k] = v
		}
		r := runCLI(t, env, append([]string{"serve", "--addr", "127.0.0.1:0", "--smtp-addr", "127.0.0.1:0"}, c.args...)...)
		if !errors.Is(r.err, cli.ErrUsage) || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%v %v: %v, want a usage error naming %s", c.env, c.args, r.err, c.want)
		}
	}
}
