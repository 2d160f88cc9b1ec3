package sendoncetest

import (
	"net/url"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// StartBehindProxy starts an instance on a fresh PostgreSQL database that
// it reaches only through a TCP proxy, and returns both: the test cuts the
// proxy (Cut) to play an outage or a restart of the database, and lets
// traffic through again (Pass). o's Backend and DB are set here.
func StartBehindProxy(t testing.TB, o Options) (*Env, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(pgTemplate.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	px, err := tcpproxy.Start(u.Host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	u.Host = px.Addr
	o.Backend, o.DB = Postgres, u.String()
	return Start(t, o), px
}
