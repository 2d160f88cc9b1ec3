package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// nodeStartWait bounds how long a sendonce process may take to say it is
// listening (or, for a worker, started); nodeStopWait how long a SIGTERM
// may take before SIGKILL.
const (
	nodeStartWait = 30 * time.Second
	nodeStopWait  = 40 * time.Second
)

// node is one sendonce process of the soak, which it kills, stops and
// restarts with the same arguments. Its log goes to a file of its own.
type node struct {
	name string
	role string // all, api or worker
	bin  string
	args []string
	log  string // log file

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // SIGSTOPped
	url     atomic.Pointer[string]
	starts  int
}

func newNode(name, role, bin, dir string, args []string) *node {
	n := &node{name: name, role: role, bin: bin, log: filepath.Join(dir, name+".log"),
		// --rate-limit 0: the soak's clients share one key at full speed.
		args: append([]string{"serve", "--role", role, "--addr", "127.0.0.1:0", "--rate-limit", "0"}, args...)}
	n.url.Store(new(string))
	return n
}

// URL is the node's base URL, "" while it is down (or a worker).
func (n *node) URL() string { return *n.url.Load() }

// start runs the process and waits until it is ready.
func (n *node) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", n.name, err)
	}
	n.starts++
	fmt.Fprintf(f, "---- soak: start %d at %s\n", n.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout = f
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", n.name, err)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: start: %w", n.name, err)
	}
	ready := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer f.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			addr := ""
			if m := listening.FindStringSubmatch(line); m != nil {
				addr = m[1]
			} else if !strings.Contains(line, "worker started") {
				continue
			}
			select {
			case ready <- addr:
			default:
			}
		}
		_, _ = io.Copy(f, stderr)
		_ = cmd.Wait()
	}()
	n.cmd, n.exited, n.stopped = cmd, exited, false
	select {
	case addr := <-ready:
		if addr != "" {
			u := "http://" + addr
			n.url.Store(&u)
		}
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before it was ready (see %s)", n.name, n.log)
	case <-time.After(nodeStartWait):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s not ready after %s (see %s)", n.name, nodeStartWait, n.log)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return ctx.Err()
	}
}

// signal sends sig to the running process; false when there is none.
func (n *node) signal(sig syscall.Signal) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.aliveLocked() {
		return false
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		n.stopped = true
	case syscall.SIGCONT:
		n.stopped = false
	}
	return true
}

// kill SIGKILLs the process and waits for it to be gone; false when
// there was none.
func (n *node) kill() bool {
	n.url.Store(new(string))
	killed := n.signal(syscall.SIGKILL)
	if killed {
		<-n.exited
	}
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
	return killed
}

// running says whether the process is up (stopped or not).
func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.aliveLocked()
}

// aliveLocked is running with n.mu held.
func (n *node) aliveLocked() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// term stops the process gracefully (SIGCONT first, should it be
// stopped), bounded by nodeStopWait, then by SIGKILL.
func (n *node) term() error {
	n.signal(syscall.SIGCONT)
	if !n.signal(syscall.SIGTERM) {
		return nil
	}
	n.mu.Lock()
	exited, cmd := n.exited, n.cmd
	n.mu.Unlock()
	n.url.Store(new(string))
	select {
	case <-exited:
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
			return fmt.Errorf("%s: exit after SIGTERM: %s (see %s)", n.name, cmd.ProcessState, n.log)
		}
		return nil
	case <-time.After(nodeStopWait):
		n.kill()
		return errors.New(n.name + ": no exit within " + nodeStopWait.String() + " of SIGTERM")
	}
}

// raceMark begins each report of the race detector in a race-enabled
// process's stderr (its log here).
const raceMark = "WARNING: DATA RACE"

// races counts the race detector's reports in the node's log, and returns
// the first, cut to a few dozen lines.
func (n *node) races() (count int, first string, err error) {
	f, err := os.Open(n.log)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	var b strings.Builder
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, raceMark) {
			count++
		}
		if count == 1 && lines < 40 {
			b.WriteString(line + "\n")
			lines++
		}
	}
	return count, b.String(), sc.Err()
}

// countRaces adds the race reports of every node's log to rep, the first
// of each node's as a finding.
func countRaces(nodes []*node, rep *soakReport) {
	for _, n := range nodes {
		c, first, err := n.races()
		if err != nil {
			rep.Findings = append(rep.Findings, fmt.Sprintf("race: cannot read %s: %v", n.log, err))
			rep.Other++
			continue
		}
		if c > 0 {
			rep.Races += c
			rep.Findings = append(rep.Findings, fmt.Sprintf("race: %d reports in %s, the first:\n%s", c, n.log, first))
		}
	}
}
