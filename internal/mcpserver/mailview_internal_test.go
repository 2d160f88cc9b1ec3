package mcpserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
)

// TestHTMLText_DropsWhatAReaderDoesNotSee: markup, scripts, styles and the
// usual ways of hiding text from a person are gone; visible text stays.
func TestHTMLText_DropsWhatAReaderDoesNotSee(t *testing.T) {
	for _, c := range []struct{ name, html, want string }{
		{"blocks and lists", `<h1>Order</h1><p>Two <b>items</b>:</p><ul><li>one</li><li>two</li></ul>`, "Order\n\nTwo items:\n\n- one\n\n- two"},
		{"script and style", `<style>.x{}</style><script>steal()</script><p>ok</p>`, "ok"},
		{"display none", `<p>ok</p><div style="display: none">do evil</div>`, "ok"},
		{"zero font", `<p>ok</p><span style="font-size:0">do evil</span>`, "ok"},
		{"hidden attribute", `<p>ok</p><p hidden>do evil</p>`, "ok"},
		{"visibility", `<p>ok</p><p style="color:red;visibility:hidden">do evil</p>`, "ok"},
		{"small but visible", `<p style="font-size:0.9em">small</p>`, "small"},
		{"image alt", `<img alt="logo" src="https://x.example/a.png">`, "[image: logo]"},
		{"entities", `<p>a &lt;b&gt; &amp; c</p>`, "a <b> & c"},
	} {
		if got := htmlText(c.html); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestMessageData_BoundsAndCleans: invisible characters (which can spell a
// hidden instruction) are dropped, the text is cut at the bound and says
// so, links are listed once, bounded, http(s) only.
func TestMessageData_BoundsAndCleans(t *testing.T) {
	tagged := "Hi" + string([]rune{0xE0049, 0xE0067}) + "\u200b there\x07"
	long := strings.Repeat("é", MaxTextBytes) // two bytes each
	var links strings.Builder
	for i := range MaxLinks + 10 {
		fmt.Fprintf(&links, "https://l%d.example/ ", i)
	}
	m := &client.ReceivedMessage{ID: "rcv_1", From: "a@b.example", Subject: tagged, ReceivedAt: time.Now(),
		Text: long + " javascript:alert(1) http://x.example/a. http://x.example/a " + links.String()}
	d := messageData(m, true)
	if d.Subject != "Hi there" {
		t.Errorf("subject %q", d.Subject)
	}
	if !d.Truncated || len(d.Text) > MaxTextBytes || d.TextBytes <= MaxTextBytes || !strings.HasPrefix(d.Text, "éé") || strings.HasSuffix(d.Text, "\xc3") {
		t.Errorf("truncated %v, %d bytes of %d", d.Truncated, len(d.Text), d.TextBytes)
	}
	if len(d.Links) != MaxLinks || d.Links[0].URL != "http://x.example/a" || d.Links[0].Host != "x.example" {
		t.Errorf("%d links, first %+v", len(d.Links), d.Links[0])
	}
	if d := messageData(&client.ReceivedMessage{HTML: "<p>only html</p>"}, true); d.Text != "only html" || d.TextSource != "html" {
		t.Errorf("html only: %+v", d)
	}
	if d := messageData(&client.ReceivedMessage{}, true); d.TextSource != "none" || d.Text != "" {
		t.Errorf("no body: %+v", d)
	}
}
