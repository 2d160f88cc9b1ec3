package app

import (
	"errors"
	"fmt"
	htmltemplate "html/template"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// Bounds on rendering one template, so that one tenant's template cannot
// take the process's memory or a core: Go templates can loop (range over
// an integer, nested ranges over request data) and printf can pad to any
// width.
const (
	// MaxRenderedBytes caps each rendered part (subject, text, html).
	MaxRenderedBytes = 1 << 20
	// MaxTemplateIterations caps the range iterations of one render, all
	// parts together.
	MaxTemplateIterations = 100_000
	// TemplateRenderTimeout bounds one render, all parts together.
	TemplateRenderTimeout = 2 * time.Second
	// maxFormatWidth bounds printf widths and precisions.
	maxFormatWidth = 1000
	// maxProducedBytes caps the bytes the string-making builtins (print,
	// printf, println, html, js, urlquery) may read and make in one
	// render, all parts together: what a chain of variables built from
	// each other, or one call naming a large value many times, can hold
	// in memory before any of it is written.
	maxProducedBytes = 4 * MaxRenderedBytes
	// maxCalls caps the builtin calls of one render, all parts together:
	// CPU for a template without a loop, which the iteration count does
	// not see.
	maxCalls = 1_000_000
)

// tickFunc is the function injected at the start of every range body:
// it counts iterations and watches the clock. The name cannot clash with
// a template's own calls: templates cannot define functions.
const tickFunc = "sendonce_budget_tick"

var (
	errTooManyIterations = errors.New("too many loop iterations")
	errTooSlow           = errors.New("rendering took too long")
	errTooLarge          = errors.New("rendered output too large")
	errFormat            = errors.New("printf width or precision too large")
	errTooManyArgs       = errors.New("too many arguments in one call")
	// errUnbounded marks what ValidateTemplate refuses though it parses.
	errUnbounded = errors.New("unbounded template")
)

// budget is the state of one render.
type budget struct {
	iterations int
	calls      int
	produced   int
	deadline   time.Time
}

// made counts a builtin's call and the n bytes it made, and stops the
// render past the bounds.
func (b *budget) made(n int) error {
	b.calls++
	if b.produced += n; b.produced > maxProducedBytes {
		return errTooLarge
	}
	if b.calls > maxCalls {
		return errTooManyIterations
	}
	if b.calls%256 == 0 && !b.deadline.IsZero() && time.Now().After(b.deadline) {
		return errTooSlow
	}
	return nil
}

func (b *budget) tick() (string, error) {
	b.iterations++
	if b.iterations > MaxTemplateIterations {
		return "", errTooManyIterations
	}
	if b.iterations%256 == 0 && time.Now().After(b.deadline) {
		return "", errTooSlow
	}
	return "", nil
}

// formatVerb finds the flags, width and precision of each printf verb.
var formatVerb = regexp.MustCompile(`%[-+# 0]*(\*|\d*)(?:\.(\*|\d*))?`)

// checkFormat refuses formats whose padding could be arbitrarily large.
func checkFormat(format string) error {
	for _, m := range formatVerb.FindAllStringSubmatch(format, -1) {
		for _, n := range m[1:] {
			if n == "*" {
				return errFormat
			}
			if n != "" {
				if v, err := strconv.Atoi(n); err != nil || v > maxFormatWidth {
					return errFormat
				}
			}
		}
	}
	return nil
}

// funcs are the functions every template is parsed with: the budget's
// tick, and the string-making builtins wrapped so that what they make
// counts against b. A variable may hold what they make, so the writer's
// cap alone does not bound memory: a chain of variables, each built from
// the one before, doubles at every link.
func funcs(b *budget) map[string]any {
	return map[string]any{
		tickFunc: b.tick,
		// printf's format may come from the request's variables, so it is
		// checked at every call.
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format); err != nil {
				return "", err
			}
			if err := b.read(format, args); err != nil {
				return "", err
			}
			return b.string(fmt.Sprintf(format, args...))
		},
		"print":    b.wrap(fmt.Sprint),
		"println":  b.wrap(fmt.Sprintln),
		"html":     b.wrap(texttemplate.HTMLEscaper),
		"js":       b.wrap(texttemplate.JSEscaper),
		"urlquery": b.wrap(texttemplate.URLQueryEscaper),
	}
}

// wrap makes a string-making builtin count what it reads before it runs
// and what it made after.
func (b *budget) wrap(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := b.read("", args); err != nil {
			return "", err
		}
		return b.string(f(args...))
	}
}

// read counts what a builtin is about to format — its format and every
// argument, a variable as often as it is named — before any of it is
// formatted. What it then makes is at most a few times that (an escaper's
// entity, printf's %x or %q), once: it is counted after, and the render
// stops.
func (b *budget) read(format string, args []any) error {
	if len(args) > maxCallArgs+1 { // +1: a pipeline's value
		return errTooManyArgs
	}
	room := maxProducedBytes - b.produced
	if b.produced += len(format) + inputsSize(args, room); b.produced > maxProducedBytes {
		return errTooLarge
	}
	return nil
}

// string counts what a builtin made.
func (b *budget) string(s string) (string, error) {
	if err := b.made(len(s)); err != nil {
		return "", err
	}
	return s, nil
}

// cappedWriter keeps at most max bytes and then fails every write, which
// stops the template's execution.
type cappedWriter struct {
	b   strings.Builder
	max int
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.b.Write(p)
}

// checkTree refuses what no budget can bound cheaply or what has no use in
// a stored message template: calls of other templates (recursion), ranges
// over integer constants beyond the iteration budget, printf formats with
// huge padding. It also injects the budget tick into every range body.
func checkTree(tree *parse.Tree, tick *parse.ActionNode) error {
	var err error
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if err != nil || n == nil {
			return
		}
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.TemplateNode:
			err = fmt.Errorf("%w: templates may not call templates ({{template}} or {{block}})", errUnbounded)
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			if n.IsAssign {
				// {{$x = …}} inside a range carries a value from one
				// iteration to the next: the way to grow a string
				// without bound. A declaration ({{$x := …}}) is scoped
				// to its iteration.
				err = fmt.Errorf("%w: templates may not assign to a variable ({{$x = …}}); declare it once ({{$x := …}})", errUnbounded)
				return
			}
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			if len(n.Args) > maxCallArgs+1 {
				err = fmt.Errorf("%w: a call with %d arguments (at most %d)", errUnbounded, len(n.Args)-1, maxCallArgs)
				return
			}
			for _, a := range n.Args {
				if s, ok := a.(*parse.StringNode); ok && checkFormat(s.Text) != nil {
					err = fmt.Errorf("%w: format %q: %v (at most %d)", errUnbounded, s.Text, errFormat, maxFormatWidth)
					return
				}
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			if n.Pipe != nil && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
				if num, ok := n.Pipe.Cmds[0].Args[0].(*parse.NumberNode); ok && (!num.IsInt || num.Int64 > MaxTemplateIterations) {
					err = fmt.Errorf("%w: range over %s: at most %d iterations", errUnbounded, num.Text, MaxTemplateIterations)
					return
				}
			}
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
			if tick != nil && n.List != nil {
				n.List.Nodes = append([]parse.Node{tick.Copy()}, n.List.Nodes...)
			}
		}
	}
	walk(tree.Root)
	return err
}

// tickNode is a parsed {{sendonce_budget_tick}} action.
func tickNode() *parse.ActionNode {
	t := texttemplate.Must(texttemplate.New("tick").Funcs(funcs(&budget{})).Parse("{{" + tickFunc + "}}"))
	return t.Tree.Root.Nodes[0].(*parse.ActionNode)
}

// parseText parses one text part, checks it and arms it with b.
func parseText(name, src string, b *budget) (*texttemplate.Template, error) {
	tt, err := texttemplate.New(name).Option("missingkey=error").Funcs(funcs(b)).Parse(src)
	if err != nil {
		return nil, err
	}
	if err := checkParsed(len(tt.Templates()), tt.Tree); err != nil {
		return nil, err
	}
	return tt, nil
}

// checkParsed is what parseText and parseHTML refuse in a part that
// parsed into n templates with tree as its own: templates defined
// beside it, or what checkTree refuses.
func checkParsed(n int, tree *parse.Tree) error {
	if n > 1 {
		return fmt.Errorf("%w: templates may not define templates ({{define}} or {{block}})", errUnbounded)
	}
	return checkTree(tree, tickNode())
}

// parseHTML is parseText for the HTML part. The tick is injected before
// the first Execute, which is when html/template escapes the tree.
func parseHTML(src string, b *budget) (*htmltemplate.Template, error) {
	ht, err := htmltemplate.New("html").Option("missingkey=error").Funcs(funcs(b)).Parse(src)
	if err != nil {
		return nil, err
	}
	if err := checkParsed(len(ht.Templates()), ht.Tree); err != nil {
		return nil, err
	}
	return ht, nil
}

// RenderTemplate renders t with vars: text/template for the subject and the
// text part, html/template (contextual escaping) for the HTML part. A
// variable the template uses but vars lacks is CodeTemplateMissingVar; a
// render past the bounds (MaxRenderedBytes per part, MaxTemplateIterations
// and TemplateRenderTimeout in all) is CodeValidation.
func RenderTemplate(t *core.Template, vars map[string]any) (subject, text, html string, err error) {
	if vars == nil {
		vars = map[string]any{}
	}
	if inputSize(vars, maxVariableBytes, 0) > maxVariableBytes {
		return "", "", "", core.Errorf(core.CodeValidation, "variables", "the template variables are larger than %d bytes", maxVariableBytes)
	}
	b := &budget{deadline: time.Now().Add(TemplateRenderTimeout)}
	if subject, err = execText("subject", t.Subject, vars, b); err != nil {
		return "", "", "", err
	}
	if text, err = execText("text", t.Text, vars, b); err != nil {
		return "", "", "", err
	}
	if t.HTML != "" {
		ht, perr := parseHTML(t.HTML, b)
		if perr != nil {
			return "", "", "", core.Errorf(core.CodeValidation, "template_id", "template html does not parse: %v", perr)
		}
		w := &cappedWriter{max: MaxRenderedBytes}
		if xerr := ht.Execute(w, vars); xerr != nil {
			return "", "", "", templateExecError(xerr)
		}
		html = w.b.String()
	}
	return subject, text, html, nil
}

func execText(name, src string, vars map[string]any, b *budget) (string, error) {
	if src == "" {
		return "", nil
	}
	tt, err := parseText(name, src, b)
	if err != nil {
		return "", core.Errorf(core.CodeValidation, "template_id", "template %s does not parse: %v", name, err)
	}
	w := &cappedWriter{max: MaxRenderedBytes}
	if err := tt.Execute(w, vars); err != nil {
		return "", templateExecError(err)
	}
	return w.b.String(), nil
}

func templateExecError(err error) error {
	switch {
	case errors.Is(err, errTooLarge):
		return core.Errorf(core.CodeValidation, "variables", "the template renders more than %d bytes", MaxRenderedBytes)
	case errors.Is(err, errTooManyIterations):
		return core.Errorf(core.CodeValidation, "variables", "the template loops more than %d times", MaxTemplateIterations)
	case errors.Is(err, errTooSlow):
		return core.Errorf(core.CodeValidation, "variables", "the template takes longer than %v to render", TemplateRenderTimeout)
	case errors.Is(err, errTooManyArgs):
		return core.Errorf(core.CodeValidation, "variables", "a call takes more than %d arguments", maxCallArgs)
	case errors.Is(err, errFormat):
		return core.Errorf(core.CodeValidation, "variables", "a printf format pads wider than %d", maxFormatWidth)
	}
	msg := err.Error()
	if strings.Contains(msg, "map has no entry for key") {
		// text/template words it as `map has no entry for key "name"`.
		_, key, _ := strings.Cut(msg, "map has no entry for key ")
		return core.Errorf(core.CodeTemplateMissingVar, "variables", "the template uses variable %s, which the request lacks", key)
	}
	return core.Errorf(core.CodeValidation, "variables", "template could not be rendered: %v", err)
}

// ValidateTemplate checks that a template parses and that its work is not
// obviously unbounded (see checkTree).
func ValidateTemplate(t *core.Template) error {
	if t.Subject == "" {
		return core.Errorf(core.CodeValidation, "subject", "subject is required")
	}
	if t.Text == "" && t.HTML == "" {
		return core.Errorf(core.CodeValidation, "text", "text or html is required")
	}
	b := &budget{}
	for _, f := range []struct{ name, src string }{{"subject", t.Subject}, {"text", t.Text}} {
		if _, err := parseText(f.name, f.src, b); err != nil {
			return templateRefused(f.name, err)
		}
	}
	if _, err := parseHTML(t.HTML, b); err != nil {
		return templateRefused("html", err)
	}
	return nil
}

func templateRefused(part string, err error) error {
	if errors.Is(err, errUnbounded) {
		return core.Errorf(core.CodeValidation, part, "refused: %v", err)
	}
	return core.Errorf(core.CodeValidation, part, "does not parse: %v", err)
}
