package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// completedSend is one key the first server answered 200, with the
// request and the answer's bytes.
type completedSend struct{ body, answer string }

// sendLoad posts new keys from a few goroutines until stopped, keeping
// every 200 answer.
type sendLoad struct {
	url, secret string
	client      *http.Client
	stop        atomic.Bool
	wg          sync.WaitGroup

	mu   sync.Mutex
	done map[string]completedSend
}

func startSendLoad(t *testing.T, url, secret string, workers int) *sendLoad {
	l := &sendLoad{url: url, secret: secret, client: &http.Client{Timeout: 10 * time.Second}, done: map[string]completedSend{}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Bounded: the test stops it long before.
			for i := 0; i < 20000 && !l.stop.Load(); i++ {
				l.post(t, fmt.Sprintf("backup-%d-%05d", w, i))
			}
		}()
	}
	return l
}

// post sends one new key until it is answered 200; it reports with
// t.Errorf only, so it may run on any goroutine.
func (l *sendLoad) post(t *testing.T, key string) {
	body := fmt.Sprintf(`{"to":"%s@example.com","subject":"Backup %s","text":"hello %s"}`, key, key, key)
	for try := 0; try < 50; try++ {
		req, _ := http.NewRequest("POST", l.url+"/v1/send", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+l.secret)
		req.Header.Set("Idempotency-Key", key)
		resp, err := l.client.Do(req)
		if err != nil {
			t.Errorf("key %s: %v", key, err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			l.mu.Lock()
			l.done[key] = completedSend{body: body, answer: string(b)}
			l.mu.Unlock()
			return
		case http.StatusServiceUnavailable:
			time.Sleep(20 * time.Millisecond)
		default:
			t.Errorf("key %s: %d %s", key, resp.StatusCode, b)
			return
		}
	}
	t.Errorf("key %s: no 200 in 50 tries", key)
}

// completed is a copy of the keys answered so far.
func (l *sendLoad) completed() map[string]completedSend {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]completedSend, len(l.done))
	for k, v := range l.done {
		out[k] = v
	}
	return out
}

func (l *sendLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

// waitMore waits (bounded) until the load has n more keys than it had.
func (l *sendLoad) waitMore(t *testing.T, n int) {
	t.Helper()
	want := l.count() + n
	for end := time.Now().Add(30 * time.Second); l.count() < want; {
		if time.Now().After(end) {
			t.Fatalf("load made %d keys in 30s, want %d", l.count(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *sendLoad) finish() {
	l.stop.Store(true)
	l.wg.Wait()
}

// TestBackup_CopyOfARunningServerReplaysEveryCompletedKey: `sendonce
// backup` runs while clients keep sending new keys; a server started on
// the copy replays, byte for byte, every key answered before the backup
// began, and the copy passes integrity_check. Much of what the first
// server committed is still in its -wal file when the backup runs, so a
// copy of the database file alone loses keys here.
func TestBackup_CopyOfARunningServerReplaysEveryCompletedKey(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "sendonce.db")
	db := "sqlite:" + dbPath
	copyPath := filepath.Join(dir, "backup", "copy.db")
	if err := os.Mkdir(filepath.Dir(copyPath), 0o700); err != nil {
		t.Fatal(err)
	}
	secret := createKey(t, db, "backup", "send,read")
	p := startServe(t, "--db", db)

	load := startSendLoad(t, p.url, secret, 4)
	defer load.finish()
	load.waitMore(t, 50)
	waitWALFrames(t, dbPath, 400)
	before := load.completed()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, "backup", "--db", db, "--to", copyPath).CombinedOutput()
	if err != nil {
		t.Fatalf("sendonce backup: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), copyPath) || !strings.Contains(string(out), "integrity_check ok") {
		t.Errorf("backup printed %q; want the path and integrity_check ok", out)
	}
	load.waitMore(t, 50) // the server kept accepting
	load.finish()
	if t.Failed() {
		t.FailNow()
	}
	if got := integrityCheck(t, copyPath); got != "ok" {
		t.Fatalf("integrity_check of the copy: %s", got)
	}

	q := startServe(t, "--db", "sqlite:"+copyPath)
	replay := &sendLoad{url: q.url, secret: secret, client: &http.Client{Timeout: 10 * time.Second}, done: map[string]completedSend{}}
	lost := 0
	for key, c := range before {
		replay.post(t, key)
		if got := replay.completed()[key].answer; got != c.answer {
			if lost++; lost <= 3 {
				t.Errorf("key %s on the copy answered\n%s\nwant, as before the backup,\n%s", key, got, c.answer)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of the %d keys answered before the backup do not replay from the copy", lost, len(before))
	}
	t.Logf("%d keys answered before the backup, all replayed from the copy; %d in all", len(before), load.count())
}

// waitWALFrames waits (bounded) until the -wal file of the SQLite database
// at path holds at least n pages not yet copied back into the database
// file. The server copies them back every 1,000 pages: starting a backup
// halfway there leaves many answered keys in the -wal file alone, where a
// copy that ignores it loses them, and leaves no copying back during the
// time the backup takes to start. The count is mxFrame of the WAL index
// (the -shm file's first header, at byte 16, in the machine's byte order).
func waitWALFrames(t *testing.T, path string, n uint32) {
	t.Helper()
	var frames uint32
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path + "-shm")
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= 20 {
			frames = binary.NativeEndian.Uint32(b[16:20])
		}
		if frames >= n {
			return
		}
	}
	t.Fatalf("the -wal file reached %d pages in 30s, want %d", frames, n)
}

// integrityCheck runs PRAGMA integrity_check on the SQLite file at path,
// read-only.
func integrityCheck(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "; ")
}

// TestBackup_PostgresNamesPgDump: backup of a PostgreSQL database writes
// nothing, points at pg_dump and exits 2 (the caller's choice of tool).
func TestBackup_PostgresNamesPgDump(t *testing.T) {
	to := filepath.Join(t.TempDir(), "copy.db")
	cmd := exec.Command(binPath, "backup", "--db", "postgres://sendonce@127.0.0.1:1/sendonce", "--to", to)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("backup on PostgreSQL: %v, want exit code 2\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "pg_dump") || !strings.Contains(stderr.String(), "docs/operations.md") {
		t.Errorf("stderr does not point at pg_dump and docs/operations.md:\n%s", stderr.String())
	}
	if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup on PostgreSQL left %s (%v)", to, err)
	}
}
