package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/sofadb/sofa/couch"
)

// fdReserve is the open files a run needs beside its connections:
// standard streams, the archive, spool and parking files of a backup,
// the control listener.
const fdReserve = 64

// fdCheck warns once per run when the servers opened so far may hold
// more connections (--max-conns each) than the process may open files:
// dials beyond the limit fail with "too many open files" and are retried,
// silently without -v.
var fdCheck struct {
	sync.Mutex
	servers int
	warned  bool
}

// checkOpenFiles counts one more server reached with maxConns
// connections (0: couch.DefaultMaxConns) and prints the warning the
// first time the sum passes the open-file limit.
func checkOpenFiles(maxConns int) {
	limit, ok := openFileLimit()
	if !ok {
		return
	}
	if maxConns <= 0 {
		maxConns = couch.DefaultMaxConns
	}
	fdCheck.Lock()
	defer fdCheck.Unlock()
	fdCheck.servers++
	if msg := openFilesWarning(maxConns, fdCheck.servers, limit); msg != "" && !fdCheck.warned {
		fdCheck.warned = true
		fmt.Fprintln(os.Stderr, "sofa: warning: "+msg)
	}
}

// openFilesWarning is the warning for servers servers of maxConns
// connections each under an open-file limit of limit files, or "" when
// they fit.
func openFilesWarning(maxConns, servers int, limit uint64) string {
	need := uint64(maxConns)*uint64(servers) + fdReserve
	if need <= limit {
		return ""
	}
	return fmt.Sprintf("--max-conns %d: %d server(s) may hold %d connections, and the run about %d open files, above this process's open-file limit of %d (ulimit -n): connections beyond it fail and are retried, slowing the run; lower --max-conns or raise the limit",
		maxConns, servers, uint64(maxConns)*uint64(servers), need, limit)
}
