package transport_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sendonce/sendonce/internal/transport"
)

func TestClassString(t *testing.T) {
	for c, want := range map[transport.Class]string{
		transport.Temporary: "temporary",
		transport.Permanent: "permanent",
		transport.Ambiguous: "ambiguous",
		0:                   "Class(0)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", int(c), got, want)
		}
	}
}

func TestClassOf(t *testing.T) {
	perm := &transport.Error{Class: transport.Permanent, Stage: transport.StageRcpt, Code: 550, Err: io.EOF}
	tests := []struct {
		name string
		err  error
		want transport.Class
	}{
		{"nil", nil, 0},
		{"plain error", errors.New("boom"), transport.Temporary},
		{"direct", perm, transport.Permanent},
		{"wrapped", fmt.Errorf("sending: %w", perm), transport.Permanent},
		{"ambiguous", &transport.Error{Class: transport.Ambiguous}, transport.Ambiguous},
	}
	for _, tt := range tests {
		if got := transport.ClassOf(tt.err); got != tt.want {
			t.Errorf("%s: ClassOf = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !errors.Is(perm, io.EOF) {
		t.Error("Error does not unwrap to its Err")
	}
	if got, want := perm.Error(), "transport: permanent failure at rcpt: EOF"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
