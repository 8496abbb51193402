package main

import (
	"strconv"
	"strings"
	"unicode"
)

// escapeControls escapes the control characters of s (a newline, a carriage
// return, an escape sequence in an archive or database name), so that a
// line printed with it stays one line and cannot drive the terminal.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r) // '\n', '\x1b'
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
