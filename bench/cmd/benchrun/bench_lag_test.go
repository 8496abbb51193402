package main

import (
	"net"
	"os"
	"testing"
	"time"
)

func TestSourceConnsCountsOwnEstablishedSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if n := sourceConns(os.Getpid(), port); n != 0 {
		t.Fatalf("before any connection: %d", n)
	}
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		defer (<-accepted).Close()
	}
	// Only the two outgoing connections have the listener's port as
	// their remote port.
	if n := sourceConns(os.Getpid(), port); n != 2 {
		t.Fatalf("sourceConns = %d, want 2", n)
	}
	if procCPU(os.Getpid()) < 0 {
		t.Fatal("negative CPU time")
	}
}

func TestPct(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if pct(d, 0.5) != 6 || pct(d, 0.99) != 10 || pct(d, 1) != 10 || pct(nil, 0.5) != 0 {
		t.Fatalf("pct: %v %v %v", pct(d, 0.5), pct(d, 0.99), pct(d, 1))
	}
}
