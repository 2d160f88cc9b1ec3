package agent_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/agent"
)

// The test vectors of the documented derivation. They were checked with an
// independent implementation (Python: json.dumps(sort_keys=True,
// separators=(",", ":")) and hashlib.sha256); a change here is a change of
// the key format and needs a new version prefix.
func TestIntentKey_Vectors(t *testing.T) {
	for _, v := range []struct {
		intent  agent.Intent
		rcpt    []string
		mailbox string
		want    string
	}{
		{
			// {"intent":{"kind":"invoice_reminder","period":"2026-11","reference":"INV-1042"},"mailbox":"default","recipients":["ada@example.com"],"v":1}
			agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-11"}, []string{"ada@example.com"}, "",
			"mcp-v1:551dc32102793de00e02d6cb24bcdc29d8629683761646fa37e566aa02331150",
		},
		{
			// {"intent":{"date":"2026-11-29","kind":"welcome","reference":"user-42"},"mailbox":"billing","recipients":["ada@example.com","bob@example.com"],"v":1}
			agent.Intent{Kind: "welcome", Reference: "user-42", Date: "2026-11-29"}, []string{"Bob <bob@example.com>", "ada@example.com"}, "billing",
			"mcp-v1:e83d68fb4eefd0fe6ab5a6fb0c8070ff85c76bb40e3617cd95516020ea49140e",
		},
	} {
		got, err := agent.IntentKey(v.intent, v.rcpt, v.mailbox)
		if err != nil || got != v.want {
			t.Errorf("IntentKey(%+v, %v, %q) = %q, %v; want %q", v.intent, v.rcpt, v.mailbox, got, err, v.want)
		}
	}
}

func TestIntentKey_SameEmailSameKey(t *testing.T) {
	base, _ := agent.IntentKey(agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-11"},
		[]string{"ada@example.com", "bob@example.com"}, "default")
	for _, c := range []struct {
		intent agent.Intent
		rcpt   []string
	}{
		{agent.Intent{Kind: " Invoice_Reminder ", Reference: " INV-1042", Period: "2026-11 "}, []string{"bob@example.com", "ada@example.com"}},
		{agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-11"}, []string{`"Ada L." <ADA@Example.com>`, "bob@example.com", "ada@example.com"}},
	} {
		if got, err := agent.IntentKey(c.intent, c.rcpt, ""); err != nil || got != base {
			t.Errorf("%+v %v: %q, %v; want %q", c.intent, c.rcpt, got, err, base)
		}
	}
	for _, c := range []struct {
		intent  agent.Intent
		rcpt    []string
		mailbox string
	}{
		{agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-12"}, []string{"ada@example.com", "bob@example.com"}, ""},
		{agent.Intent{Kind: "invoice_reminder", Reference: "inv-1042", Period: "2026-11"}, []string{"ada@example.com", "bob@example.com"}, ""},
		{agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Date: "2026-11-01"}, []string{"ada@example.com", "bob@example.com"}, ""},
		{agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-11"}, []string{"ada@example.com"}, ""},
		{agent.Intent{Kind: "invoice_reminder", Reference: "INV-1042", Period: "2026-11"}, []string{"ada@example.com", "bob@example.com"}, "billing"},
	} {
		if got, _ := agent.IntentKey(c.intent, c.rcpt, c.mailbox); got == base {
			t.Errorf("%+v %v %q: same key as another email", c.intent, c.rcpt, c.mailbox)
		}
	}
}

func TestIntentKey_Invalid(t *testing.T) {
	ok := []string{"ada@example.com"}
	for name, c := range map[string]struct {
		in   agent.Intent
		rcpt []string
	}{
		"no kind":         {agent.Intent{Reference: "r", Period: "p"}, ok},
		"bad kind":        {agent.Intent{Kind: "a b", Reference: "r", Period: "p"}, ok},
		"no reference":    {agent.Intent{Kind: "k", Period: "p"}, ok},
		"no period":       {agent.Intent{Kind: "k", Reference: "r"}, ok},
		"period and date": {agent.Intent{Kind: "k", Reference: "r", Period: "p", Date: "2026-11-29"}, ok},
		"bad date":        {agent.Intent{Kind: "k", Reference: "r", Date: "29.11.2026"}, ok},
		"control char":    {agent.Intent{Kind: "k", Reference: "r\nBcc: x", Period: "p"}, ok},
		"no recipient":    {agent.Intent{Kind: "k", Reference: "r", Period: "p"}, nil},
		"bad recipient":   {agent.Intent{Kind: "k", Reference: "r", Period: "p"}, []string{"not an address"}},
	} {
		if _, err := agent.IntentKey(c.in, c.rcpt, ""); !errors.Is(err, agent.ErrInvalidIntent) {
			t.Errorf("%s: err %v, want ErrInvalidIntent", name, err)
		}
	}
}

// TestReplyKey: the same reply asked again, however its lines end, is one
// key; another text, recipient, action or message is another.
func TestReplyKey(t *testing.T) {
	base := agent.Reply{Action: "reply", MessageID: "rcv_1", Text: "Thanks, we will look.", To: []string{"Ann <ann@example.com>"}}
	k, err := agent.ReplyKey(base)
	if err != nil || !strings.HasPrefix(k, agent.KeyPrefix) {
		t.Fatalf("key %q, %v", k, err)
	}
	same := base
	same.Text, same.To = "  Thanks, we will look.\r\n", []string{"ANN@example.com", "ann@example.com"}
	if k2, _ := agent.ReplyKey(same); k2 != k {
		t.Errorf("the same reply reworded in white space and case: %s != %s", k2, k)
	}
	for name, change := range map[string]func(*agent.Reply){
		"text":      func(r *agent.Reply) { r.Text = "Thanks." },
		"recipient": func(r *agent.Reply) { r.To = append(r.To, "bob@example.com") },
		"action":    func(r *agent.Reply) { r.Action = "forward" },
		"message":   func(r *agent.Reply) { r.MessageID = "rcv_2" },
		"reply all": func(r *agent.Reply) { r.ReplyAll = true },
	} {
		r := base
		r.To = slices.Clone(base.To)
		change(&r)
		if k2, _ := agent.ReplyKey(r); k2 == k {
			t.Errorf("another %s, same key", name)
		}
	}
	if _, err := agent.ReplyKey(agent.Reply{Action: "send", MessageID: "rcv_1"}); err == nil {
		t.Error("an unknown action was keyed")
	}
}
