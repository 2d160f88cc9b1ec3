package app

import (
	"mime"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
)

// AgentHeader names a message an agent key sent, with the key's name, so
// that recipients and their filters can tell agent mail from a person's
// (docs/agents.md). The DKIM signature covers it; the server alone sets
// it: agent keys may not set headers, and no key may set this one.
const AgentHeader = "X-Sendonce-Agent"

// agentMark is the header an agent key's message carries: its name, as
// an RFC 2047 word when it is not plain ASCII, else the key's id.
func agentMark(key *core.APIKey) core.Header {
	v := mime.QEncoding.Encode("utf-8", key.Name)
	if key.Name == "" || message.CheckHeader(AgentHeader, v) != nil {
		v = key.ID
	}
	return core.Header{Name: AgentHeader, Value: v}
}

// markRaw puts the agent header at the top of a submitted message.
func markRaw(key *core.APIKey, raw []byte) []byte {
	h := agentMark(key)
	return append([]byte(h.Name+": "+h.Value+"\r\n"), raw...)
}

// reservedHeader reports whether name is one only the server sets.
func reservedHeader(name string) bool { return strings.EqualFold(name, AgentHeader) }
