package sendoncetest

import (
	"testing"

	"github.com/sendonce/sendonce/client"
)

// NewClient is the public client of cfg as mod (nil for none) changes it:
// each test package picks its own timeouts and retries for cfg, and a
// test changes what it needs through mod. A config New refuses fails t.
func NewClient(t testing.TB, cfg client.Config, mod func(*client.Config)) *client.Client {
	t.Helper()
	if mod != nil {
		mod(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
