package dashboard_test

// End-to-end tests in a real headless Chromium (Debian's chromium package;
// .ci/run installs it), driven with chromedp: what a person does in the
// dashboard, against a whole running instance.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const chromiumPath = "/usr/bin/chromium"

// browserWait bounds each wait for something that must happen in the page.
const browserWait = 20 * time.Second

// newChromium starts a headless Chromium with a fresh profile. Under CI
// a missing browser fails the test: CI must run it.
func newChromium(t testing.TB) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: .ci/run installs it (apt-get install -y chromium)", chromiumPath)
		}
		t.Skipf("browser tests skipped: %s is missing (apt-get install -y chromium)", chromiumPath)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	// Start the browser on this context: a shorter-lived one that started
	// it would close it when it ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

// counter is a web server on 127.0.0.1 that counts the requests it gets:
// what a mail's script or remote image would fetch.
type counter struct {
	*httptest.Server
	mu sync.Mutex
	n  map[string]int
}

func newCounter(t *testing.T) *counter {
	c := &counter{n: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "image/gif")
		_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// do runs steps and fails the test with what was being done.
func do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitCtx bounds one wait.
func waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, browserWait)
}

// shot saves a full-page PNG under dir (and under
// SENDONCE_DASHBOARD_SCREENSHOTS when set, to refresh docs/img).
func shot(t testing.TB, ctx context.Context, dir, name string) {
	t.Helper()
	png := run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	for _, d := range []string{dir, os.Getenv("SENDONCE_DASHBOARD_SCREENSHOTS")} {
		if d == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// signInBrowser signs in through the form, the way a person does.
func signInBrowser(t testing.TB, ctx context.Context, env *sendoncetest.Env, secret string) {
	t.Helper()
	wctx, cancel := waitCtx(ctx)
	defer cancel()
	do(t, wctx, "sign in",
		chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), secret),
		chromedp.Click(chromedp.CSS("form[action='/ui/signin'] button")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	if h1 := run(t, ctx, "read the heading", chromedp.Text(chromedp.CSS("h1"))); h1 != "Overview" {
		t.Fatalf("after sign-in the page is %q, want Overview", h1)
	}
}

// tour is one person's walk through the dashboard in one browser, step by
// step; each step leaves the browser signed in where the next expects.
type tour struct {
	t      *testing.T
	ctx    context.Context
	env    *sendoncetest.Env
	shots  string
	remote *counter
	// approval is the secret of a key whose sends wait for approval.
	approval string
}

// do runs steps within browserWait.
func (tr *tour) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tr.t.Helper()
	wctx, cancel := waitCtx(tr.ctx)
	defer cancel()
	do(tr.t, wctx, what, steps...)
}

// poll waits until a JavaScript expression is true.
func (tr *tour) poll(what, expr string) {
	tr.t.Helper()
	wctx, cancel := waitCtx(tr.ctx)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](expr)); err != nil {
		tr.t.Errorf("%s: %v", what, err)
	}
}

func TestBrowser_Dashboard(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		tr := &tour{t: t, ctx: newChromium(t), env: sendoncetest.Start(t, sendoncetest.Options{Backend: b, WebhookAllowPrivate: true}), shots: t.TempDir(), remote: newCounter(t)}
		_, tr.approval = tr.env.NewKey(t, app.NewKeyParams{Name: "agent", Scopes: []core.Scope{core.ScopeSend}, RequiresApproval: true})
		signInBrowser(t, tr.ctx, tr.env, tr.env.AdminKey)
		id := tr.liveSendsList()
		tr.mailFrame(id)
		tr.receivedThread()
		tr.approve()
		tr.createKey()
		tr.createWebhook()
		tr.suppressions()
		tr.postWithoutCSRF()
		tr.liveInbox()
		tr.templatePreview()
		tr.keyboard()
		tr.do("open the overview", chromedp.Navigate(tr.env.URL+"/"), chromedp.WaitVisible(chromedp.CSS(".tiles")))
		shot(t, tr.ctx, tr.shots, "overview")
		tr.do("open the inbox", chromedp.Navigate(tr.env.URL+"/ui/inbox"), chromedp.WaitVisible(chromedp.CSS("tbody tr")))
		shot(t, tr.ctx, tr.shots, "inbox")
		other := tr.readKeySeesNoAdminAction()
		tr.phoneDark(other)
		t.Logf("screenshots in %s", tr.shots)
	})
}

// liveSendsList: a send made through the API appears in the open list
// without a reload. It returns the send's id.
func (tr *tour) liveSendsList() string {
	t, ctx, env := tr.t, tr.ctx, tr.env
	tr.do("open the sends list", chromedp.Navigate(env.URL+"/ui/sends"), chromedp.WaitVisible(chromedp.CSS(".live")))
	run(t, ctx, "mark the page", chromedp.Evaluate[bool]("window.notReloaded = true"))
	html := fmt.Sprintf(`<p>Hello from the mail</p><script>new Image().src=%q; fetch(%q)</script><img src=%q alt="remote">`,
		tr.remote.URL+"/script-image", tr.remote.URL+"/script-fetch", tr.remote.URL+"/remote.png")
	id := apiSend(t, env, env.AdminKey, "Your receipt for order 1042", html)
	tr.do("wait for the new send's row", chromedp.WaitVisible(chromedp.CSS("#row-"+id)))
	if !run(t, ctx, "check the page was not reloaded", chromedp.Evaluate[bool]("window.notReloaded === true")) {
		t.Fatal("the sends page reloaded to show the new send")
	}
	shot(t, ctx, tr.shots, "sends")
	return id
}

// mailFrame: the send's page shows its timeline, and its HTML in a frame
// that runs no script and loads nothing remote until asked.
func (tr *tour) mailFrame(id string) {
	t, ctx, remote := tr.t, tr.ctx, tr.remote
	tr.do("open the send", chromedp.Click(chromedp.CSS("#row-"+id+" a")), chromedp.WaitVisible(chromedp.CSS("ol.timeline")),
		chromedp.WaitVisible(chromedp.CSS("iframe.mail")))
	if tl := run(t, ctx, "read the timeline", chromedp.Text(chromedp.CSS("ol.timeline"))); !strings.Contains(tl, "accepted") {
		t.Errorf("timeline %q lacks accepted", tl)
	}
	sb := run(t, ctx, "read the frame's sandbox", chromedp.AttributeValue(chromedp.CSS("iframe.mail"), "sandbox"))
	if !sb.Exists || sb.Value != "" {
		t.Errorf("the mail frame's sandbox is %+v, want present and empty (no scripts, no same origin)", sb)
	}
	time.Sleep(time.Second) // the frame has loaded; give a script or an image the time to fetch
	for _, p := range []string{"/script-image", "/script-fetch", "/remote.png"} {
		if n := remote.count(p); n != 0 {
			t.Errorf("the mail's %s was fetched %d times with remote content blocked", p, n)
		}
	}
	shot(t, ctx, tr.shots, "send")
	tr.do("load remote images", chromedp.Click(chromedp.CSS("a[href='?remote=1']")), chromedp.WaitVisible(chromedp.CSS("iframe.mail")))
	for deadline := time.Now().Add(browserWait); remote.count("/remote.png") == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if remote.count("/remote.png") == 0 {
		t.Error("after the click the remote image was still not fetched: the frame does not show the mail")
	}
	if n := remote.count("/script-image") + remote.count("/script-fetch"); n != 0 {
		t.Errorf("the mail's script ran (%d fetches) once remote images were allowed", n)
	}
}

// receivedThread: a received message's thread, opened from the Mail list,
// shows its HTML in the sandboxed frame with its script and remote image
// blocked; a reply typed in the page is sent and shown after it.
func (tr *tour) receivedThread() {
	t, ctx, env, remote := tr.t, tr.ctx, tr.env, tr.remote
	html := fmt.Sprintf(`<p>Where is my order?</p><script>new Image().src=%q</script><img src=%q alt="remote">`,
		remote.URL+"/rcv-script", remote.URL+"/rcv-remote.png")
	raw := "From: alice@sender.test\r\nTo: support@recv.test\r\nSubject: Order\r\nMessage-ID: <b1@sender.test>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n" + html + "\r\n"
	_, rcv := receiveFixture(t, env, "support@recv.test", raw, core.ReceivedAuth{SPF: "pass", DKIM: "pass", DMARC: "pass"})
	tr.do("open the thread", chromedp.Navigate(env.URL+"/ui/mail"), chromedp.Click(chromedp.CSS("#row-"+rcv.ThreadID+" a")),
		chromedp.WaitVisible(chromedp.CSS("#msg-"+rcv.ID+" iframe.mail")))
	sb := run(t, ctx, "read the frame's sandbox", chromedp.AttributeValue(chromedp.CSS("#msg-"+rcv.ID+" iframe.mail"), "sandbox"))
	if !sb.Exists || sb.Value != "" {
		t.Errorf("the received mail's frame sandbox is %+v, want present and empty", sb)
	}
	time.Sleep(time.Second) // give a script or an image the time to fetch
	for _, p := range []string{"/rcv-script", "/rcv-remote.png"} {
		if n := remote.count(p); n != 0 {
			t.Errorf("the received mail's %s was fetched %d times", p, n)
		}
	}
	shot(t, ctx, tr.shots, "thread")
	tr.do("reply", chromedp.SendKeys(chromedp.CSS("#reply-"+rcv.ID), "It ships today."),
		chromedp.Click(chromedp.CSS("form.reply button")), chromedp.WaitVisible(chromedp.CSS("article[id^='msg-snd_']")))
	if body := run(t, ctx, "read the thread", chromedp.Text(chromedp.CSS("main"))); !strings.Contains(body, "It ships today.") {
		t.Errorf("after the reply the thread does not show it")
	}
}

// approve: approve a pending send, after a confirmation that says what
// approving does, and see it become sent.
func (tr *tour) approve() {
	t, ctx, env := tr.t, tr.ctx, tr.env
	pending := apiSend(t, env, tr.approval, "Agent: follow-up to the Q3 invoice", "<p>please approve</p>")
	tr.do("approve", chromedp.Navigate(env.URL+"/ui/approvals"), chromedp.Click(chromedp.CSS("#row-"+pending+" a")),
		chromedp.Click(chromedp.CSS("a[href$='action=approve']")), chromedp.WaitVisible(chromedp.CSS("p.warn")))
	if c := run(t, ctx, "read the confirmation", chromedp.Text(chromedp.CSS("p.warn"))); !strings.Contains(c, "queues this send for delivery") {
		t.Errorf("the confirmation says %q, not what approving does", c)
	}
	shot(t, ctx, tr.shots, "confirm")
	tr.do("confirm", chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("ol.timeline")))
	status := ""
	for deadline := time.Now().Add(browserWait); time.Now().Before(deadline); {
		if status = run(t, ctx, "read the status", chromedp.Text(chromedp.CSS("dl.facts .status"))); status == "sent" {
			break
		}
		time.Sleep(100 * time.Millisecond)
		do(t, ctx, "reload", chromedp.Reload())
	}
	if status != "sent" {
		t.Errorf("the approved send is %q, want sent", status)
	}
}

// createKey: the new key's secret is shown once, can be copied, and works.
func (tr *tour) createKey() {
	secret := tr.secretShownOnce("key", "/ui/keys", "#name", "so_", "made-in-browser",
		chromedp.SendKeys(chromedp.CSS("#name"), "made-in-browser"), chromedp.Click(chromedp.CSS("input[value=read]")))
	if r := tr.env.Do(tr.t, sendoncetest.Request{Method: "GET", Path: "/v1/sends", Key: secret}); r.Status != http.StatusOK {
		tr.t.Errorf("the key made in the browser: GET /v1/sends %d", r.Status)
	}
}

// createWebhook: the new endpoint's signing secret is shown once, with a
// copy button, and not when the page is opened again.
func (tr *tour) createWebhook() {
	endpoint := tr.remote.URL + "/hook"
	tr.secretShownOnce("webhook", "/ui/webhooks", "#endpoint", "whsec_", endpoint,
		chromedp.SendKeys(chromedp.CSS("#endpoint"), endpoint), chromedp.Click(chromedp.CSS("input[value='email.delivered']")))
}

// secretShownOnce fills the create form of the page at path (whose first
// field is field) and submits it: the answer shows a secret starting with
// prefix, with a button that copies it; the page opened again lists the
// new item by name and no longer shows the secret. It returns the secret.
func (tr *tour) secretShownOnce(what, path, field, prefix, name string, fill ...chromedp.Action[chromedp.Void]) string {
	t, ctx, env := tr.t, tr.ctx, tr.env
	t.Helper()
	steps := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(env.URL + path)}, fill...)
	steps = append(steps, chromedp.Click(chromedp.CSS("form[action='"+path+"'] button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#secret")))
	tr.do("create a "+what, steps...)
	secret := run(t, ctx, "read the "+what+"'s secret", chromedp.Value(chromedp.CSS("#secret")))
	if !strings.HasPrefix(secret, prefix) {
		t.Fatalf("the new %s's secret is %q", what, secret)
	}
	tr.do("copy it", chromedp.Click(chromedp.CSS("button[data-copy]")))
	tr.poll("the copy button never said Copied", `document.querySelector("button[data-copy]").textContent === "Copied"`)
	shot(t, ctx, tr.shots, what+"-created")
	tr.do("reopen the "+what+"s", chromedp.Navigate(env.URL+path), chromedp.WaitVisible(chromedp.CSS(field)))
	if page := run(t, ctx, "read the "+what+"s page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(page, secret) || !strings.Contains(page, name) {
		t.Errorf("the %ss page, opened again, shows the secret (%v) or lacks %s (%v)", what, strings.Contains(page, secret), name, !strings.Contains(page, name))
	}
	shot(t, ctx, tr.shots, what+"s")
	return secret
}

// the confirmation.
func (tr *tour) suppressions() {
	t, ctx, env := tr.t, tr.ctx, tr.env
	const addr = "unsubscribed@example.org"
	tr.do("add a suppression", chromedp.Navigate(env.URL+"/ui/suppressions"), chromedp.SendKeys(chromedp.CSS("#add-email"), addr),
		chromedp.SendKeys(chromedp.CSS("#reason"), "asked by phone"), chromedp.Click(chromedp.CSS("form[action='/ui/suppressions'][method=post] button")),
		chromedp.WaitVisible(chromedp.CSS("tbody tr")))
	if list := run(t, ctx, "read the list", chromedp.Text(chromedp.CSS("table.list"))); !strings.Contains(list, addr) || !strings.Contains(list, "asked by phone") {
		t.Errorf("the suppression list %q lacks the address added", list)
	}
	shot(t, ctx, tr.shots, "suppressions")
	tr.do("remove it", chromedp.Click(chromedp.CSS("a[href$='/remove']")), chromedp.WaitVisible(chromedp.CSS("main form button")),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("p.empty")))
	if ok, err := env.Server.Store.IsSuppressed(context.Background(), "default", addr); ok || err != nil {
		t.Errorf("after removal %s is suppressed: %v (%v)", addr, ok, err)
	}
}

// postWithoutCSRF: a POST without the token, from the signed-in page
// itself, is refused and changes nothing.
func (tr *tour) postWithoutCSRF() {
	st := run(tr.t, tr.ctx, "POST without CSRF", chromedp.Evaluate[int](`fetch("/ui/keys", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "name=forged&scope=admin"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if st != http.StatusForbidden {
		tr.t.Errorf("POST /ui/keys without the CSRF token: %d, want 403", st)
	}
	if keys, _ := tr.env.Server.Service.TenantKeys(context.Background(), "default"); slicesHasName(keys, "forged") {
		tr.t.Error("the POST without CSRF created a key")
	}
}

// liveInbox: the dev inbox shows a new captured message without a reload.
func (tr *tour) liveInbox() {
	tr.do("open the inbox", chromedp.Navigate(tr.env.URL+"/ui/inbox"), chromedp.WaitVisible(chromedp.CSS("tbody[data-live] tr")))
	run(tr.t, tr.ctx, "mark the page", chromedp.Evaluate[bool]("window.notReloaded = true"))
	apiSend(tr.t, tr.env, tr.env.AdminKey, "Password reset", "<p>reset</p>")
	tr.poll("the new captured message never appeared in the open inbox",
		`[...document.querySelectorAll("tbody[data-live] a")].some(a => a.textContent === "Password reset") && window.notReloaded === true`)
}

// templatePreview: the preview follows the typing, rendered with the
// sample variables; saving stores the template through the service.
func (tr *tour) templatePreview() {
	tr.do("edit a template", chromedp.Navigate(tr.env.URL+"/ui/templates?id=welcome"), chromedp.WaitVisible(chromedp.CSS("#html")),
		chromedp.SendKeys(chromedp.CSS("#subject"), "Welcome, {{.name}}"), chromedp.SendKeys(chromedp.CSS("#html"), "<p>Hi {{.name}}!</p>"))
	tr.poll("the live preview never showed the template with the sample variables",
		`document.querySelector("[data-preview-html]").srcdoc.includes("Hi Ada!") && document.querySelector("[data-preview-subject]").textContent === "Welcome, Ada"`)
	shot(tr.t, tr.ctx, tr.shots, "template")
	tr.do("save it", chromedp.Click(chromedp.CSS("button[value=save]")), chromedp.WaitVisible(chromedp.CSS("p.ok")))
	if tpl, err := tr.env.Server.Store.Template(context.Background(), "default", "welcome"); err != nil || tpl.HTML != "<p>Hi {{.name}}!</p>" {
		tr.t.Errorf("the saved template is %+v (%v)", tpl, err)
	}
}

// keyboard: the first Tab reaches the skip link.
func (tr *tour) keyboard() {
	tr.do("tab", chromedp.Navigate(tr.env.URL+"/ui/keys"), chromedp.WaitVisible(chromedp.CSS("#name")), chromedp.KeyEvent("\t"))
	if c := run(tr.t, tr.ctx, "read the focus", chromedp.Evaluate[string](`document.activeElement.className`)); c != "skip" {
		tr.t.Errorf("the first Tab focuses %q, want the skip link", c)
	}
}

// readKeySeesNoAdminAction signs in with a read key and opens a pending
// send: no admin control anywhere. It returns that send's id.
func (tr *tour) readKeySeesNoAdminAction() string {
	t, ctx, env := tr.t, tr.ctx, tr.env
	other := apiSend(t, env, tr.approval, "Agent: meeting notes for Friday", "<p>second pending</p>")
	_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
	tr.do("sign out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.CSS("#key")))
	signInBrowser(t, ctx, env, reader)
	tr.do("open the pending send as a reader", chromedp.Navigate(env.URL+"/ui/sends/"+other), chromedp.WaitVisible(chromedp.CSS("ol.timeline")))
	n := run(t, ctx, "count admin controls", chromedp.Evaluate[int](
		`document.querySelectorAll("a[href*='/confirm'], nav a[href='/ui/keys'], nav a[href='/ui/audit'], form[action*='/action']").length`))
	if n != 0 {
		t.Errorf("a read key's page shows %d admin controls", n)
	}
	if s := run(t, ctx, "read the status", chromedp.Text(chromedp.CSS("dl.facts .status"))); s != string(core.StatusPendingApproval) {
		t.Errorf("the second send is %q, want pending_approval", s)
	}
	tr.do("open the sends as a reader", chromedp.Navigate(env.URL+"/ui/sends"), chromedp.WaitVisible(chromedp.CSS("#row-"+other)))
	shot(t, ctx, tr.shots, "sends-all")
	return other
}

// phoneDark: on a phone, in the system's dark mode, the page follows the
// setting and nothing is wider than the screen.
func (tr *tour) phoneDark(rowID string) {
	t, ctx := tr.t, tr.ctx
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatalf("emulate dark mode: %v", err)
	}
	tr.do("open the sends on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(tr.env.URL+"/ui/sends"), chromedp.WaitVisible(chromedp.CSS("#row-"+rowID)))
	if bg := run(t, ctx, "read the background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`)); bg != "rgb(15, 18, 22)" {
		t.Errorf("in dark mode the background is %s, want the dark one", bg)
	}
	if w := run(t, ctx, "read the page width", chromedp.Evaluate[int](`document.body.scrollWidth`)); w > 390 {
		t.Errorf("at phone width the page is %dpx wide (scrolls sideways)", w)
	}
	shot(t, ctx, tr.shots, "sends-phone-dark")
}

func slicesHasName(keys []*core.APIKey, name string) bool {
	for _, k := range keys {
		if k.Name == name {
			return true
		}
	}
	return false
}
