package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/storage"
)

// Exit codes, one table for every verb (shown in --help).
const (
	exitOK          = 0   // everything copied or equal
	exitFatal       = 1   // fatal error: nothing or not all done
	exitUsage       = 2   // usage error
	exitPartial     = 3   // finished, but some documents or databases were not copied (each listed)
	exitDifferent   = 4   // verify found a difference
	exitInterrupted = 130 // interrupted (SIGINT/SIGTERM); checkpoints written
)

const exitCodesHelp = `Exit codes:
  0    everything copied (or equal, for verify)
  1    fatal error: nothing or not everything was done
  2    usage error (bad flags or arguments)
  3    finished, but some documents or databases were not copied (each is listed)
  4    verify found a difference
  130  interrupted (SIGINT or SIGTERM); checkpoints were written, rerun to resume`

// exitError carries an exit code with a message printed once by main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func fatal(err error) error { return &exitError{code: exitFatal, err: err} }

func codeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	return exitFatal
}

// libErr maps an error of the library to its exit code: wrong options
// or arguments are usage errors (an archive name that exists, or is a
// directory, too), an interruption is one, anything else is fatal. An
// error that already carries its code keeps it.
func libErr(err error) error {
	var e *exitError
	var oe *sofa.OptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return err
	case errors.Is(err, storage.ErrIsDir):
		return usageErr("%w (--force only replaces an archive file)", err)
	case errors.Is(err, storage.ErrExist):
		return usageErr("%w (use --force to overwrite it)", err)
	case errors.As(err, &oe):
		return &exitError{code: exitUsage, err: err}
	case errors.Is(err, context.Canceled):
		return err // main says what an interruption means
	}
	return fatal(err)
}
