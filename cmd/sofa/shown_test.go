package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapeControls: a name with a newline or an escape sequence prints as one
// line of visible escapes; other names (unicode included) as they are.
func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain.sofa":       "plain.sofa",
		"ünï ✓.sofa":       "ünï ✓.sofa",
		"new\nline.sofa":   `new\nline.sofa`,
		"esc\x1b[31m.sofa": `esc\x1b[31m.sofa`,
	} {
		if got := escapeControls(in); got != want {
			t.Errorf("escapeControls(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCLI_ArchiveNameOneLine: verify of an archive whose file name holds
// a newline and an escape sequence says so on one line, escaped (it split
// the line, and the escape reached the terminal).
func TestCLI_ArchiveNameOneLine(t *testing.T) {
	data, err := os.ReadFile("../../archive/testdata/full-records.sofa")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "new\nline\x1b[31m.sofa")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, sofaBin(t), "verify", path)
	if r.code != exitOK || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "\x1b") || !strings.Contains(r.stderr, `new\nline\x1b[31m.sofa is sound: `) {
		t.Errorf("exit %d, stderr %q: want one line naming the archive escaped", r.code, r.stderr)
	}
}
