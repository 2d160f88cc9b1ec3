package postfixtest

import (
	"strings"
	"testing"
)

// The routes become relay_domains and transport_maps in one order whatever
// the map's, so that every run gets the same main.cf.
func TestMainCF_RoutesSortedAndBracketed(t *testing.T) {
	routes := map[string]string{"b.test": "127.0.0.1:2602", "a.test": "127.0.0.1:2601", "c.test": "127.0.0.1:2603"}
	want := []string{
		"relay_domains = a.test, b.test, c.test",
		"transport_maps = inline:{ a.test=smtp:[127.0.0.1]:2601, b.test=smtp:[127.0.0.1]:2602, c.test=smtp:[127.0.0.1]:2603 }",
		"queue_directory = /x/spool",
		"maillog_file = /x/maillog",
	}
	for range 5 { // map order varies between iterations
		cf := mainCF("/x", routes)
		for _, line := range want {
			if !strings.Contains(cf, "\n"+line+"\n") {
				t.Fatalf("main.cf lacks the line %q:\n%s", line, cf)
			}
		}
	}
}
