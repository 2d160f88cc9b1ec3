package deploy_test

import (
	"crypto/x509"
	"debug/elf"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/syncbuf"
)

// TestDockerfile_StaticNonRootImage: the image's last stage is an empty
// base holding a static binary, the CA roots, a data volume the unprivileged
// user owns, a HEALTHCHECK and the ports; the static binary built as the
// Dockerfile builds it answers /healthz from a root holding only what the
// image's COPY lines put there, run as the image's user with the image's
// environment only, and stops cleanly on SIGTERM. No container engine runs
// here: the root is a chroot (so the test needs root), not a pulled image.
func TestDockerfile_StaticNonRootImage(t *testing.T) {
	df, err := parseDockerfile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	_, build := df.goBuild()
	if !slices.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("the build line %q does not set CGO_ENABLED=0", build)
	}
	if !slices.Contains(build, "-trimpath") {
		t.Errorf("the build line %q does not trim paths", build)
	}
	img := df.final()
	if img.base != "scratch" {
		t.Fatalf("the image's base is %q; this test builds its root from nothing, as scratch is", img.base)
	}
	uid, gid := imageUser(t, img)
	env := img.env()
	volumes := imageVolumes(img)
	dbPath, ok := strings.CutPrefix(env["SENDONCE_DB"], "sqlite:")
	if !ok || !slices.ContainsFunc(volumes, func(v string) bool { return strings.HasPrefix(dbPath, v+"/") }) {
		t.Errorf("SENDONCE_DB=%q is not a SQLite file in a VOLUME (%v)", env["SENDONCE_DB"], volumes)
	}
	_, port, err := net.SplitHostPort(env["SENDONCE_ADDR"])
	if err != nil || !strings.HasPrefix(env["SENDONCE_ADDR"], "0.0.0.0:") {
		t.Errorf("SENDONCE_ADDR=%q: the API must listen on every address of the container", env["SENDONCE_ADDR"])
	}
	var exposed []string
	for _, in := range img.all("EXPOSE") {
		exposed = append(exposed, in.words()...)
	}
	if !slices.Contains(exposed, port) {
		t.Errorf("EXPOSE %v lacks the API's port %s", exposed, port)
	}
	health := imageHealthcheck(t, img)
	entry := append(lastWords(img, "ENTRYPOINT"), lastWords(img, "CMD")...)
	if len(entry) != 2 || entry[1] != "serve" || len(health) < 2 || health[0] != entry[0] || health[1] != "healthcheck" {
		t.Fatalf("ENTRYPOINT+CMD %q and HEALTHCHECK %q: want the binary's serve and healthcheck", entry, health)
	}
	sf := loadServeFlags(t)
	for k := range env {
		sf.checkEnv(t, "Dockerfile ENV", k)
	}

	assertStatic(t, binPath)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("running the image's root needs root (chroot), which CI has")
		}
		t.Skip("running the image's root needs root (chroot)")
	}
	root := imageRoot(t, df)
	workdir := lastWords(img, "WORKDIR")
	run := func(args []string, env []string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		cmd.Dir = workdir[0]
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return cmd
	}
	var imgEnv []string
	addr := freeLoopbackAddr(t) // loopback in the test, in place of 0.0.0.0
	for k, v := range env {
		if k == "SENDONCE_ADDR" {
			v = addr
		}
		imgEnv = append(imgEnv, k+"="+v)
	}
	if out, err := run([]string{entry[0], "version"}, imgEnv).CombinedOutput(); err != nil || !strings.Contains(string(out), "deploy-test") {
		t.Errorf("sendonce version in the image: %q, %v; want the VERSION the build set (-X names a variable that exists)", out, err)
	}

	serve := run(entry, imgEnv)
	var logs syncbuf.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		<-done
	})
	healthy := false
	for deadline := time.Now().Add(30 * time.Second); !healthy && time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("serve in the image's root ended: %v\n%s", err, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		healthy = run(health, imgEnv).Run() == nil
	}
	if !healthy {
		t.Fatalf("the HEALTHCHECK never passed in 30s\n%s", logs.String())
	}
	if fi, err := os.Stat(filepath.Join(root, dbPath)); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("the database %s in the volume: %v (want it owned by uid %d)", dbPath, err, uid)
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(sf.defaultGrace(t) + 10*time.Second):
		t.Fatalf("serve did not stop after SIGTERM\n%s", logs.String())
	}
}

// imageUser is the last USER's numeric uid and gid; root is refused.
func imageUser(t *testing.T, img stage) (uint32, uint32) {
	t.Helper()
	w := lastWords(img, "USER")
	if len(w) != 1 {
		t.Fatal("the image sets no USER: it would run as root")
	}
	u, g, _ := strings.Cut(w[0], ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		t.Fatalf("USER %s: want a numeric uid:gid other than root (the image has no /etc/passwd)", w[0])
	}
	return uint32(uid), uint32(gid)
}

func imageVolumes(img stage) []string {
	var vs []string
	for _, in := range img.all("VOLUME") {
		vs = append(vs, in.words()...)
	}
	return vs
}

// imageHealthcheck is the HEALTHCHECK's command, in exec form.
func imageHealthcheck(t *testing.T, img stage) []string {
	t.Helper()
	hc := img.all("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("the image has %d HEALTHCHECKs, want 1", len(hc))
	}
	rest, ok := strings.CutPrefix(hc[0].args, "CMD ")
	if !ok || !strings.HasPrefix(rest, "[") {
		t.Fatalf("HEALTHCHECK %q: want CMD in exec form (the image has no shell)", hc[0].args)
	}
	return instruction{args: rest}.words()
}

func lastWords(st stage, cmd string) []string {
	all := st.all(cmd)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1].words()
}

// assertStatic: no program interpreter, no shared library.
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a program interpreter: it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

// imageRoot builds, in a temp dir, the file tree the final stage's COPY
// lines make: the built binary for the build's -o path, this machine's
// file for a system file (the build stage is Debian, as this machine is),
// and a directory the build stage makes with mkdir (with its chmod), each
// with COPY's --chown. Any other source fails the test, so a new COPY
// needs a thought here.
func imageRoot(t *testing.T, df *dockerfile) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	_, build := df.goBuild()
	out := build[slices.Index(build, "-o")+1]
	var buildRuns [][]string
	for _, st := range df.stages[:len(df.stages)-1] {
		for _, in := range st.all("RUN") {
			buildRuns = append(buildRuns, in.words())
		}
	}
	for _, in := range df.final().all("COPY") {
		w := in.words()
		if len(w) != 2 || in.flags["from"] == "" {
			t.Fatalf("COPY %s: want one source from the build stage", in.args)
		}
		src, dst := w[0], filepath.Join(root, w[1])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case src == out:
			copyFile(t, binPath, dst, 0o755)
		case strings.HasPrefix(src, "/etc/"):
			copyFile(t, src, dst, 0o644)
			if strings.HasSuffix(src, ".crt") {
				b, _ := os.ReadFile(dst)
				if !x509.NewCertPool().AppendCertsFromPEM(b) {
					t.Errorf("%s holds no certificate", src)
				}
			}
		case madeDir(buildRuns, src):
			if err := os.Mkdir(dst, dirMode(buildRuns, src)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dst, dirMode(buildRuns, src)); err != nil { // past the umask
				t.Fatal(err)
			}
		default:
			t.Fatalf("COPY %s: this test does not know what the build stage puts at %s", in.args, src)
		}
		if own := in.flags["chown"]; own != "" {
			u, g, _ := strings.Cut(own, ":")
			uid, _ := strconv.Atoi(u)
			gid, _ := strconv.Atoi(g)
			if err := os.Chown(dst, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func madeDir(runs [][]string, dir string) bool {
	for _, w := range runs {
		if i := slices.Index(w, "mkdir"); i >= 0 && slices.Contains(w[i:], dir) {
			return true
		}
	}
	return false
}

// dirMode is the mode a RUN's "chmod MODE dir" gives, else 0755.
func dirMode(runs [][]string, dir string) os.FileMode {
	mode := os.FileMode(0o755)
	for _, w := range runs {
		for i := 0; i+2 < len(w); i++ {
			if w[i] == "chmod" && path.Clean(w[i+2]) == dir {
				m, err := strconv.ParseUint(w[i+1], 8, 32)
				if err == nil {
					mode = os.FileMode(m&0o777) | os.ModeDir
					if m&0o1000 != 0 {
						mode |= os.ModeSticky
					}
				}
			}
		}
	}
	return mode
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
