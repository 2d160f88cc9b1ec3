package transport_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

// TestMXDeliverEach: per-recipient outcomes across two domains. A 5xx to
// a recipient, to a domain's end of DATA, or a domain without mail
// refuses those recipients and delivers to the rest; a temporary failure
// before any DATA delivers nothing (the send is retried whole); one after
// a domain took the message is Ambiguous, with the refusals kept.
func TestMXDeliverEach(t *testing.T) {
	zone := []string{
		"a.test. MX 10 mx.a.test.", "mx.a.test. A 192.0.2.10",
		"b.test. MX 10 mx.b.test.", "mx.b.test. A 192.0.2.20",
		"nomail.test. MX 0 .",
	}
	dataErr550 := &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "rejected as spam"}
	tests := []struct {
		name      string
		to        []string
		a, b      smtptest.Behaviour
		class     transport.Class // 0: no error
		refused   []string
		aTo, bTo  []string // what each exchanger received; nil for nothing
		refusedBy int      // the SMTP code of the first refusal
	}{
		{"one recipient refused", []string{"x@a.test", "gone@a.test", "y@b.test"},
			smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"gone@a.test": mxErr550}}, smtptest.Behaviour{},
			0, []string{"gone@a.test"}, []string{"x@a.test"}, []string{"y@b.test"}, 550},
		{"a domain refuses every recipient", []string{"x@a.test", "y@b.test"},
			smtptest.Behaviour{}, smtptest.Behaviour{RcptErr: mxErr550},
			0, []string{"y@b.test"}, []string{"x@a.test"}, nil, 550},
		{"a domain refuses the message", []string{"x@a.test", "y@b.test"},
			smtptest.Behaviour{DataErr: dataErr550}, smtptest.Behaviour{},
			0, []string{"x@a.test"}, nil, []string{"y@b.test"}, 554},
		{"a domain takes no mail", []string{"x@a.test", "n@nomail.test"},
			smtptest.Behaviour{}, smtptest.Behaviour{},
			0, []string{"n@nomail.test"}, []string{"x@a.test"}, nil, 0},
		{"every recipient refused", []string{"gone@a.test", "y@b.test"},
			smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"gone@a.test": mxErr550}}, smtptest.Behaviour{RcptErr: mxErr550},
			transport.Permanent, []string{"gone@a.test", "y@b.test"}, nil, nil, 550},
		{"greylisted before DATA", []string{"gone@a.test", "x@a.test", "y@b.test"},
			smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"gone@a.test": mxErr550}}, smtptest.Behaviour{RcptErr: mxErr451},
			transport.Temporary, nil, nil, nil, 0},
		{"second domain fails after the first took it", []string{"x@a.test", "y@b.test"},
			smtptest.Behaviour{}, smtptest.Behaviour{DataErr: mxErr451},
			transport.Ambiguous, nil, []string{"x@a.test"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{})
			a.SetBehaviour(tt.a)
			b.SetBehaviour(tt.b)
			r := newRoutes(map[string]*smtptest.Server{"192.0.2.10": a, "192.0.2.20": b})
			cfg := mxConfig(dnstest.Start(t, zone...))
			cfg.DialContext = r.dial
			refused, err := transport.NewMX(cfg).DeliverEach(context.Background(),
				transport.Envelope{From: "s@sendonce.test", To: tt.to}, mxMessage("each@sendonce.test"))
			if tt.class == 0 && err != nil || tt.class != 0 && transport.ClassOf(err) != tt.class {
				t.Fatalf("DeliverEach error %v (class %v), want class %v", err, transport.ClassOf(err), tt.class)
			}
			var got []string
			for _, rf := range refused {
				got = append(got, rf.Recipient)
				if rf.Err == nil || rf.Err.Class != transport.Permanent {
					t.Errorf("refusal of %s: %+v, want a Permanent error", rf.Recipient, rf.Err)
				}
			}
			if !slices.Equal(got, tt.refused) {
				t.Errorf("refused %v, want %v", got, tt.refused)
			}
			if tt.refusedBy != 0 && (len(refused) == 0 || refused[0].Err.Code != tt.refusedBy) {
				t.Errorf("first refusal %+v, want code %d", refused, tt.refusedBy)
			}
			for name, c := range map[string]struct {
				s    *smtptest.Server
				want []string
			}{"a": {a, tt.aTo}, "b": {b, tt.bTo}} {
				msgs := c.s.Messages()
				switch {
				case c.want == nil && len(msgs) != 0:
					t.Errorf("%s received %+v, want nothing", name, msgs)
				case c.want != nil && (len(msgs) != 1 || !slices.Equal(msgs[0].To, c.want)):
					t.Errorf("%s received %+v, want one message to %v", name, msgs, c.want)
				}
			}
			var pe *transport.PartialDeliveryError
			if (tt.class == transport.Ambiguous) != errors.As(err, &pe) {
				t.Errorf("partial delivery error: %v", err)
			}
		})
	}
}
