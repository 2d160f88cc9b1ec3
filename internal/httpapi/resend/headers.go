package resend

import (
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// checkHeaderNames refuses a Resend headers object that names one header
// twice in different case ("X-A" and "x-a"): header names are
// case-insensitive, so both would be written, or one of them chosen by
// the map's random order — the same request would not make the same
// message.
func checkHeaderNames(h map[string]string) error {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names) // the same request names the same duplicate
	seen := make(map[string]string, len(h))
	for _, name := range names {
		lower := strings.ToLower(name)
		if first, dup := seen[lower]; dup {
			return core.Errorf(core.CodeValidation, "headers", "the headers %q and %q are one header (names do not differ by case): give it once", first, name)
		}
		seen[lower] = name
	}
	return nil
}
