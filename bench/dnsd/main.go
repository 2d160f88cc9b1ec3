// Command dnsd answers DNS on loopback for the benchmarks, as the local
// caching resolver an MTA is run behind would: the records given as
// arguments (zone-file syntax, as github.com/miekg/dns parses them), and
// NXDOMAIN for every other name. It prints its address and serves until
// killed. Not for use outside bench/.
//
// Usage: go run ./bench/dnsd 'sender.test. 300 IN TXT "v=spf1 ip4:127.0.0.0/8 -all"' ...
package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"github.com/miekg/dns"
)

func main() {
	zone := map[string][]dns.RR{}
	for _, s := range os.Args[1:] {
		rr, err := dns.NewRR(s)
		if err != nil || rr == nil {
			log.Fatalf("dnsd: record %q: %v", s, err)
		}
		name := strings.ToLower(rr.Header().Name)
		zone[name] = append(zone[name], rr)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pc.LocalAddr().String())
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if len(req.Question) == 1 {
			q := req.Question[0]
			rrs, ok := zone[strings.ToLower(q.Name)]
			if !ok {
				m.Rcode = dns.RcodeNameError
			}
			for _, rr := range rrs {
				if rr.Header().Rrtype == q.Qtype {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
		_ = w.WriteMsg(m)
	})
	log.Fatal((&dns.Server{PacketConn: pc, Handler: handler}).ActivateAndServe())
}
