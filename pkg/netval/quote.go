package netval

import "fmt"

// maxQuoted bounds how much of an untrusted value an error message repeats.
const maxQuoted = 64

// Quote renders an untrusted value for an error message: Go-quoted (control characters escaped) and
// truncated, so that a hostile annotation cannot flood a log line.
func Quote(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q...(%d bytes)", s[:maxQuoted], len(s))
	}
	return fmt.Sprintf("%q", s)
}
