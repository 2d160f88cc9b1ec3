package mcpserver

import (
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// HTML reduced to the text a person would see. The model never gets the
// markup: markup can hide text from the person (display:none, a zero font
// size, white on white) that the model would still read, and carry
// scripts, forms and remote images. What is hidden by the usual means is
// dropped, not shown; what is not recognised as hidden is text like any
// other, and is data all the same.

// Bounds of the reduction: the HTML parsed and the element depth walked
// (deeper content is dropped; no mail a person reads nests that deep).
const (
	maxHTMLBytes = 2 << 20
	maxHTMLDepth = 200
)

// skipped are elements whose content is not text a reader sees.
var skipped = map[string]bool{
	"head": true, "script": true, "style": true, "noscript": true, "template": true, "iframe": true,
	"object": true, "embed": true, "svg": true, "math": true, "title": true, "select": true, "button": true,
}

// blocks are elements that start a new line.
var blocks = map[string]bool{
	"p": true, "div": true, "br": true, "tr": true, "li": true, "h1": true, "h2": true, "h3": true,
	"h4": true, "h5": true, "h6": true, "table": true, "blockquote": true, "pre": true, "hr": true,
	"section": true, "article": true, "header": true, "footer": true, "ul": true, "ol": true,
}

var hiddenStyle = regexp.MustCompile(`(?i)display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:[a-z%]*)?\s*(?:;|$|!)|opacity\s*:\s*0(?:\.0*)?\s*(?:;|$|!)|max-height\s*:\s*0|mso-hide\s*:\s*all`)

func parseHTML(h string) *html.Node {
	if h == "" {
		return nil
	}
	if len(h) > maxHTMLBytes {
		h = cutUTF8(h, maxHTMLBytes)
	}
	doc, err := html.Parse(strings.NewReader(h))
	if err != nil {
		return nil
	}
	return doc
}

func attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, name) {
			return a.Val, true
		}
	}
	return "", false
}

// hidden reports an element a reader does not see.
func hidden(n *html.Node) bool {
	if skipped[n.Data] {
		return true
	}
	if _, ok := attr(n, "hidden"); ok {
		return true
	}
	if v, _ := attr(n, "aria-hidden"); strings.EqualFold(v, "true") && n.Data != "img" {
		return true
	}
	if v, _ := attr(n, "type"); n.Data == "input" && strings.EqualFold(v, "hidden") {
		return true
	}
	style, _ := attr(n, "style")
	return hiddenStyle.MatchString(style)
}

// htmlText is the visible text of an HTML body, lines trimmed and runs of
// blank lines made one.
func htmlText(h string) string {
	doc := parseHTML(h)
	if doc == nil {
		return ""
	}
	var b strings.Builder
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		if depth > maxHTMLDepth {
			return
		}
		switch n.Type {
		case html.TextNode:
			b.WriteString(n.Data)
			return
		case html.ElementNode:
			if hidden(n) {
				return
			}
			if n.Data == "img" {
				if alt, _ := attr(n, "alt"); alt != "" {
					b.WriteString("[image: " + alt + "]")
				}
			}
			if blocks[n.Data] {
				b.WriteString("\n")
			}
			if n.Data == "li" {
				b.WriteString("- ")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
		if n.Type == html.ElementNode && blocks[n.Data] {
			b.WriteString("\n")
		}
	}
	walk(doc, 0)
	return tidyLines(b.String())
}

// tidyLines collapses white space within lines and blank lines between.
func tidyLines(s string) string {
	var out []string
	blank := false
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// htmlLinks are the href of the HTML's visible links and the URLs written
// in its visible text, in order.
func htmlLinks(h string) []string {
	doc := parseHTML(h)
	if doc == nil {
		return nil
	}
	var out []string
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		if depth > maxHTMLDepth || len(out) >= MaxLinks {
			return
		}
		switch {
		case n.Type == html.ElementNode && hidden(n):
			return
		case n.Type == html.ElementNode && n.Data == "a":
			if href, ok := attr(n, "href"); ok {
				out = append(out, href)
			}
		case n.Type == html.TextNode:
			out = append(out, urlPattern.FindAllString(n.Data, MaxLinks)...)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
	}
	walk(doc, 0)
	return out
}
