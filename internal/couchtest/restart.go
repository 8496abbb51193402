package couchtest

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// Restart stops the server's process (SIGTERM to its process group,
// SIGKILL after 10 s) and starts it again on the same port with the same
// directory, configuration and data, then waits until it answers (for
// DefaultStartTimeout, or until ctx's deadline). Requests in flight fail
// meanwhile: clients see a server restarted. CouchDB started by the
// harness and PouchDB Server started with Options.OnDisk can be
// restarted; an in-memory PouchDB Server (it would lose its data) and a
// server named by SOFA_COUCHDB_URL cannot.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.external != nil:
		s.mu.Unlock()
		return errors.New("couchtest: Restart: a server named by SOFA_COUCHDB_URL is not the harness's to restart")
	case s.newCmd == nil:
		s.mu.Unlock()
		return errors.New("couchtest: Restart: an in-memory PouchDB Server would lose its data (start it with Options.OnDisk)")
	case s.stop:
		s.mu.Unlock()
		return errors.New("couchtest: Restart: the server is stopped")
	}
	s.restarting = true
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.restarting = false
		s.mu.Unlock()
	}()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		killGroup(cmd.Process.Pid)
		<-done
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	if err := s.spawn(s.newCmd()); err != nil {
		return err
	}
	return s.waitReady(ctx, s.name, s.readyPath)
}
