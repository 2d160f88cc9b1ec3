package cli_test

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// `domains add D --receive` prints an MX record a zone file takes as it
// is: the host from --mx-host (fully qualified), or a placeholder the note
// says to replace — never a quoted string (which made `IN MX "10 …"`, an
// invalid line).
func TestDomainsAdd_ReceivePrintsAValidMXLine(t *testing.T) {
	for _, tc := range []struct{ mxHost, want string }{
		{"mx.sendonce.example", "mx.sendonce.example."},
		{"", "mail.recv.example."},
	} {
		db := sqliteDSN(t)
		args := []string{"domains", "add", "recv.example", "--receive", "--db", db}
		if tc.mxHost != "" {
			args = append(args, "--mx-host", tc.mxHost)
		}
		r := runCLI(t, nil, args...)
		if r.err != nil {
			t.Fatalf("domains add: %v %s", r.err, r.stderr)
		}
		var line string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, " IN MX ") {
				line = strings.TrimSpace(l)
			}
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("the MX line %q does not parse as a zone line: %v\n%s", line, err, r.stdout)
		}
		mx, ok := rr.(*dns.MX)
		if !ok || mx.Mx != tc.want || mx.Preference != 10 || mx.Hdr.Name != "recv.example." {
			t.Fatalf("the MX line %q, want recv.example. MX 10 %s", line, tc.want)
		}
		if tc.mxHost == "" && !strings.Contains(r.stdout, "replace mail.recv.example") {
			t.Errorf("without --mx-host the output does not say to replace the placeholder:\n%s", r.stdout)
		}
	}
}
