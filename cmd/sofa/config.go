package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// applyEnvAndConfig fills every flag the user did not set from SOFA_<FLAG>
// (dashes become underscores, upper case), then from the TOML file named by
// --config or SOFA_CONFIG (keys are flag names). Precedence: flag > env >
// config file > default. It then refuses out-of-range numeric flags
// (checkFlagValues), so every verb checks them before any network access.
func applyEnvAndConfig(cmd *cobra.Command) error {
	runningCmd.Store(cmd)
	var file map[string]any
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		path = os.Getenv("SOFA_CONFIG")
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return usageErr("config file: %w", err)
		}
		if err := toml.Unmarshal(b, &file); err != nil {
			return usageErr("config file %s: %w", path, err)
		}
		for k, v := range file {
			if k == "config" || k == "help" {
				return usageErr("config file %s: %q is a command-line flag only", path, k)
			}
			if cmd.Flags().Lookup(k) == nil && !anyVerbHas(cmd.Root(), k) {
				return usageErr("config file %s: unknown setting %q", path, k)
			}
			if _, table := v.(map[string]any); table {
				return usageErr("config file %s: [%s] is a table; settings are top-level keys named as the flags (for example max-dbs = 16), one file for every verb", path, k)
			}
		}
	}
	var ferr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || ferr != nil || f.Name == "config" || f.Name == "help" {
			return
		}
		env := "SOFA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := setFromEnv(f, v); err != nil {
				ferr = usageErr("%s=%q: %w", env, v, err)
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := setFromConfig(f, v); err != nil {
				ferr = usageErr("config file %s: %s: %w", path, f.Name, err)
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	return checkFlagValues(cmd.Flags())
}

// setFromEnv sets flag f to an environment variable's value v: a
// repeatable flag (--include, --exclude, --rename) takes a
// comma-separated list (no database name holds a comma), any other the
// value as it is.
func setFromEnv(f *pflag.Flag, v string) error {
	if sv, repeatable := f.Value.(pflag.SliceValue); repeatable {
		return sv.Replace(strings.Split(v, ","))
	}
	return f.Value.Set(v)
}

// anyVerbHas says whether a command under root has the flag name: one
// config file serves every verb, each taking the settings it has (a typo,
// known to none, is still refused).
func anyVerbHas(root *cobra.Command, name string) bool {
	if root.Flags().Lookup(name) != nil || root.PersistentFlags().Lookup(name) != nil {
		return true
	}
	for _, c := range root.Commands() {
		if anyVerbHas(c, name) {
			return true
		}
	}
	return false
}

// configure applies env and config file to the flags of a copying verb
// and checks its engine options.
func configure(cmd *cobra.Command, e *engineFlags) error {
	if err := applyEnvAndConfig(cmd); err != nil {
		return err
	}
	return e.validate()
}

// setFromConfig sets flag f to a config file's value v: a TOML list sets
// each of its elements for a repeatable flag (--include, --exclude,
// --rename: a slice flag) and is refused for any other; a scalar is set
// as its text.
func setFromConfig(f *pflag.Flag, v any) error {
	list, isList := v.([]any)
	if !isList {
		return f.Value.Set(fmt.Sprint(v))
	}
	sv, repeatable := f.Value.(pflag.SliceValue)
	if !repeatable {
		return fmt.Errorf("a list is only for a setting that may be given several times (include, exclude, rename); give one value")
	}
	items := make([]string, len(list))
	for i, e := range list {
		switch e.(type) {
		case []any, map[string]any:
			return fmt.Errorf("element %d of the list is not a single value", i+1)
		}
		items[i] = fmt.Sprint(e)
	}
	return sv.Replace(items)
}
