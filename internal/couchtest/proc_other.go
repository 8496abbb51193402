//go:build unix && !linux

package couchtest

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
