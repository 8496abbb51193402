package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A TOML list in a config file sets a repeatable flag (--include,
// --exclude, --rename) to its elements, not to one pattern spelled
// "[a b]" (which, as a glob, matched other databases: a restore --replace
// deleted one the list was meant to keep); a list for any other setting,
// or a nested one, is refused.
func TestConfig_ListsForRepeatableFlags(t *testing.T) {
	run := func(conf string) (*cobra.Command, *[]string, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "c.toml")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		var include []string
		cmd := &cobra.Command{Use: "x"}
		cmd.Flags().String("config", path, "")
		cmd.Flags().StringArrayVar(&include, "include", nil, "")
		cmd.Flags().String("checkpoints", "target", "")
		return cmd, &include, applyEnvAndConfig(cmd)
	}
	for _, tc := range []struct {
		conf string
		want []string
	}{
		{`include = ["db-00*", "db-01*"]`, []string{"db-00*", "db-01*"}},
		{`include = "db-00*"`, []string{"db-00*"}},
		{`include = []`, []string{}},
	} {
		_, got, err := run(tc.conf)
		if err != nil || !slices.Equal(*got, tc.want) {
			t.Errorf("%s: include %q (%v), want %q", tc.conf, *got, err, tc.want)
		}
	}
	for _, conf := range []string{`checkpoints = ["target", "both"]`, `include = [["a"]]`,
		"[checkpoints]\ninclude = [\"a\"]", `help = true`, `config = "other.toml"`} {
		if _, _, err := run(conf); err == nil || !strings.Contains(err.Error(), "config file") {
			t.Errorf("%s: %v, want a usage error naming the config file", conf, err)
		}
	}
}

// SOFA_INCLUDE (any repeatable flag's variable) takes a comma-separated
// list, not one pattern with commas in it.
func TestConfig_EnvListsForRepeatableFlags(t *testing.T) {
	var include []string
	var checkpoints string
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().String("config", "", "")
	cmd.Flags().StringArrayVar(&include, "include", nil, "")
	cmd.Flags().StringVar(&checkpoints, "checkpoints", "target", "")
	t.Setenv("SOFA_INCLUDE", "a*,b")
	t.Setenv("SOFA_CHECKPOINTS", "x,y")
	if err := applyEnvAndConfig(cmd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(include, []string{"a*", "b"}) || checkpoints != "x,y" {
		t.Errorf("include %q, checkpoints %q; want [a* b] and the value as it is", include, checkpoints)
	}
}
