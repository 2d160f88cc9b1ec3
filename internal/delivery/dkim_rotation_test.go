package delivery_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// rotationRecord is a record of the API's answers.
type rotationRecord struct {
	Purpose, Name, Type, Value string
	Strings                    []string
}

// zoneLine is the record as a dnstest server publishes it.
func (r rotationRecord) zoneLine() string {
	var quoted []string
	for _, s := range r.Strings {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	return fmt.Sprintf("%s. 300 IN %s %s", r.Name, r.Type, strings.Join(quoted, " "))
}

// rotationDomain is what the domain views say of the keys.
type rotationDomain struct {
	Records  []rotationRecord `json:"records"`
	DKIMKeys []struct {
		Selector, State string
		RemoveAfter     *string `json:"remove_after"`
	} `json:"dkim_keys"`
	RecordsToRemove []rotationRecord `json:"records_to_remove"`
	Promoted        *string          `json:"promoted_selector"`
}

// states is "selector=state" per key, in order.
func (d rotationDomain) states() string {
	var out []string
	for _, k := range d.DKIMKeys {
		out = append(out, k.Selector+"="+k.State)
	}
	return strings.Join(out, " ")
}

// names lists the records' names, for failure messages.
func names(recs []rotationRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	return out
}

// promoted is the check's promoted selector, "" for none.
func (d rotationDomain) promoted() string {
	if d.Promoted == nil {
		return ""
	}
	return *d.Promoted
}

// hasRecord reports whether recs name the DKIM record of selector.
func hasRecord(recs []rotationRecord, selector, domain string) bool {
	for _, r := range recs {
		if r.Name == selector+"._domainkey."+domain {
			return true
		}
	}
	return false
}

func getRotation(t *testing.T, env *sendoncetest.Env, path string) rotationDomain {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	if bytes.Contains(r.Body, []byte("PRIVATE KEY")) || bytes.Contains(r.Body, []byte("-----BEGIN")) {
		t.Fatalf("GET %s shows a private key: %s", path, r.Body)
	}
	var d rotationDomain
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return d
}

var signatureSelector = regexp.MustCompile(`(?:^|[;\s])s=([^;\s]+)`)

// sendSigned sends a message from from, waits for the relay to have it
// and returns its bytes and the selector its DKIM signature names.
func sendSigned(t *testing.T, env *sendoncetest.Env, from, subject string) ([]byte, string) {
	t.Helper()
	before := len(env.SMTP.Messages())
	id := send(t, env, map[string]any{"from": from, "to": "ann@example.com", "subject": subject, "text": "Body of " + subject})
	env.WaitStatus(t, id, waitLong, core.StatusSent)
	msgs := env.SMTP.Messages()
	if len(msgs) != before+1 {
		t.Fatalf("relay has %d messages, want %d", len(msgs), before+1)
	}
	data := msgs[before].Data
	_, sig, ok := bytes.Cut(data, []byte("DKIM-Signature:"))
	if !ok {
		t.Fatalf("%s is not signed:\n%s", subject, data)
	}
	sig, _, _ = bytes.Cut(sig, []byte("\r\n\r\n"))
	m := signatureSelector.FindSubmatch(sig)
	if m == nil {
		t.Fatalf("%s: no s= in the signature %s", subject, sig)
	}
	return data, string(m[1])
}

func wantVerifies(t *testing.T, dns *dnstest.Server, what string, data []byte) {
	t.Helper()
	vs := verifyDKIM(t, dns, data)
	if len(vs) != 1 || vs[0].Err != nil {
		t.Fatalf("%s: verifications %+v, want one passing signature", what, vs)
	}
}

// rotate posts a rotation of domain under idemKey with body.
func rotate(t *testing.T, env *sendoncetest.Env, domain, idemKey string, body any) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains/" + domain + "/dkim/rotate", Key: env.AdminKey, IdemKey: idemKey, Body: body})
}

// TestDKIMRotation_SigningMovesOnceTheNewRecordIsPublished walks a
// rotation: the rotate POST answers the new selector's record (a replay,
// the same bytes; a second rotation, 409); mail is still signed with s1
// while the record is absent and a check changes nothing; once published,
// the check moves signing to s2, whose mail verifies against DNS while
// mail signed before still verifies with s1, which stays listed; past
// --dkim-retire-after, s1's record is listed for removal.
func TestDKIMRotation_SigningMovesOnceTheNewRecordIsPublished(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, SecretKey: testSecret,
			DNSResolver: dns.Addr()})
		dns.Publish(t, env.AddDomain(t, map[string]string{"domain": "rot.test"}))

		idem := rand.Text()
		first := rotate(t, env, "rot.test", idem, nil)
		if first.Status != http.StatusCreated {
			t.Fatalf("rotate: %d %s", first.Status, first.Body)
		}
		var rot struct {
			Selector, State string
			Records         []rotationRecord
		}
		if err := json.Unmarshal(first.Body, &rot); err != nil || rot.Selector != "s2" || rot.State != "pending" ||
			len(rot.Records) != 1 || rot.Records[0].Name != "s2._domainkey.rot.test" || rot.Records[0].Type != "TXT" ||
			!strings.HasPrefix(rot.Records[0].Value, "v=DKIM1; k=rsa; p=") {
			t.Fatalf("rotate answered %s (%v)", first.Body, err)
		}
		if bytes.Contains(first.Body, []byte("-----BEGIN")) {
			t.Fatalf("rotate shows a private key: %s", first.Body)
		}
		keys, err := env.Server.Store.DKIMKeys(context.Background(), "default", "rot.test")
		if err != nil || len(keys) != 1 || !dkim.IsSealed(keys[0].PrivateKey) {
			t.Fatalf("%d stored pending keys (%v): want one, sealed under SENDONCE_SECRET_KEY", len(keys), err)
		}
		replay := rotate(t, env, "rot.test", idem, nil)
		if replay.Status != first.Status || !bytes.Equal(replay.Body, first.Body) || replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s (replayed %q), want the first answer's bytes", replay.Status, replay.Body, replay.Header.Get("Idempotent-Replayed"))
		}
		if r := rotate(t, env, "rot.test", idem, map[string]string{"algorithm": "ed25519"}); r.Status != http.StatusUnprocessableEntity {
			t.Errorf("the key with another body: %d %s, want 422", r.Status, r.Body)
		}
		if r := rotate(t, env, "rot.test", rand.Text(), nil); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "s2") {
			t.Errorf("a second rotation while one is pending: %d %s, want 409 naming s2", r.Status, r.Body)
		}

		before, sel := sendSigned(t, env, "news@rot.test", "before the rotation")
		if sel != "s1" {
			t.Fatalf("mail after rotate, record absent, signed with %s, want s1", sel)
		}
		wantVerifies(t, dns, "mail signed before", before)
		check := getRotation(t, env, "/v1/domains/rot.test/check")
		if check.promoted() != "" || check.states() != "s1=active s2=pending" {
			t.Fatalf("check without the record: promoted %q, keys %s", check.promoted(), check.states())
		}
		if _, sel := sendSigned(t, env, "news@rot.test", "still the old key"); sel != "s1" {
			t.Fatalf("mail after a check that found no record signed with %s, want s1", sel)
		}
		if d := getRotation(t, env, "/v1/domains/rot.test"); !hasRecord(d.Records, "s2", "rot.test") || !hasRecord(d.Records, "s1", "rot.test") {
			t.Fatalf("while pending, records %v: want s1's and s2's to publish", names(d.Records))
		}

		dns.Publish(t, rot.Records[0].zoneLine())
		check = getRotation(t, env, "/v1/domains/rot.test/check")
		if check.promoted() != "s2" || check.states() != "s2=active s1=retiring" {
			t.Fatalf("check with the record: promoted %q, keys %s", check.promoted(), check.states())
		}
		after, sel := sendSigned(t, env, "news@rot.test", "after the rotation")
		if sel != "s2" {
			t.Fatalf("mail after the promotion signed with %s, want s2", sel)
		}
		wantVerifies(t, dns, "mail signed with the new key", after)
		wantVerifies(t, dns, "mail signed before the rotation", before)
		d := getRotation(t, env, "/v1/domains/rot.test")
		if !hasRecord(d.Records, "s1", "rot.test") || len(d.RecordsToRemove) != 0 || d.DKIMKeys[1].RemoveAfter == nil {
			t.Fatalf("retiring: records %v, to remove %v, keys %s; want s1 kept, nothing to remove", names(d.Records), names(d.RecordsToRemove), d.states())
		}

		env.Clock.Advance(app.DefaultDKIMRetireAfter + time.Minute)
		d = getRotation(t, env, "/v1/domains/rot.test")
		if d.states() != "s2=active s1=retired" || hasRecord(d.Records, "s1", "rot.test") || !hasRecord(d.RecordsToRemove, "s1", "rot.test") {
			t.Fatalf("past retire-after: keys %s, records %v, to remove %v; want s1's record to remove", d.states(), names(d.Records), names(d.RecordsToRemove))
		}
		if l := getRotation(t, env, "/v1/domains/rot.test/check"); !hasRecord(l.RecordsToRemove, "s1", "rot.test") {
			t.Fatalf("the check's records to remove: %v", names(l.RecordsToRemove))
		}
	})
}

// TestDKIMRotation_PeriodicCheckPromotes: without anyone calling the check
// route, the workers' periodic check (--domain-check-interval) leaves the
// rotation pending while the record is absent and moves signing once it
// is published.
func TestDKIMRotation_PeriodicCheckPromotes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase,
			DNSResolver: dns.Addr(), DomainCheckInterval: 30 * time.Millisecond})
		dns.Publish(t, env.AddDomain(t, map[string]string{"domain": "tick.test", "algorithm": "ed25519"}))
		r := rotate(t, env, "tick.test", rand.Text(), map[string]string{"selector": "2026a"})
		if r.Status != http.StatusCreated {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		var rot struct{ Records []rotationRecord }
		if err := json.Unmarshal(r.Body, &rot); err != nil || len(rot.Records) != 1 {
			t.Fatalf("rotate answered %s", r.Body)
		}
		asked := func() int {
			n := 0
			for _, q := range dns.Queries() {
				if q.Name == "2026a._domainkey.tick.test." {
					n++
				}
			}
			return n
		}
		deadline := time.Now().Add(waitLong)
		for asked() < 2 { // two rounds found no record
			if time.Now().After(deadline) {
				t.Fatal("the periodic check never asked for the new record")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if d := getRotation(t, env, "/v1/domains/tick.test"); d.states() != "s1=active 2026a=pending" {
			t.Fatalf("record absent: keys %s, want the rotation pending", d.states())
		}
		dns.Publish(t, rot.Records[0].zoneLine())
		for d := getRotation(t, env, "/v1/domains/tick.test"); d.states() != "2026a=active s1=retiring"; d = getRotation(t, env, "/v1/domains/tick.test") {
			if time.Now().After(deadline) {
				t.Fatalf("record published: keys %s, want 2026a active", d.states())
			}
			time.Sleep(10 * time.Millisecond)
		}
		data, sel := sendSigned(t, env, "a@tick.test", "after the periodic check")
		if sel != "2026a" {
			t.Fatalf("signed with %s, want 2026a", sel)
		}
		wantVerifies(t, dns, "mail after the periodic promotion", data)
	})
}
