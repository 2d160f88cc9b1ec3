// Package buildinfo says which sendonce a binary is: its module version
// and the commit it was built from, as the Go toolchain stamped them
// (runtime/debug.ReadBuildInfo). It imports nothing of the module.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `sendonce version --json` prints and /healthz names.
type Info struct {
	// Version is the module version (v1.2.3 for a `go install`ed release),
	// the build's -ldflags override, or "dev" for a build in a checkout.
	Version string `json:"version"`
	// Revision, Time and Modified are the VCS stamp of a build in a git
	// checkout: the commit, its time, and whether the tree had changes.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified"`
	// Go is the toolchain that built the binary.
	Go string `json:"go"`
}

// Read returns the running binary's Info; override, when set (the
// -ldflags "-X" of a release build), is its version.
func Read(override string) Info {
	in := Info{Version: "dev", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	if override != "" {
		in.Version = override
	}
	if !ok {
		return in
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form: "v1.2.3 (abc1234 2026-12-06T05:00:00Z, modified)".
func (in Info) String() string {
	s := in.Version
	if in.Revision == "" {
		return s
	}
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	s += " (" + rev
	if in.Time != "" {
		s += " " + in.Time
	}
	if in.Modified {
		s += ", modified"
	}
	return s + ")"
}
