package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles is a developer hook: SOFA_CPUPROFILE=FILE writes a pprof
// CPU profile of the whole run, SOFA_MEMPROFILE=FILE an allocation
// profile at the end (go tool pprof -sample_index=alloc_space),
// SOFA_TRACE=FILE an execution trace (go tool trace). None is
// a flag: they are for measuring sofa, not for its users. The returned
// function ends the profiles; failures are printed and otherwise ignored.
func startProfiles() (stop func()) {
	cpu, mem, tr := os.Getenv("SOFA_CPUPROFILE"), os.Getenv("SOFA_MEMPROFILE"), os.Getenv("SOFA_TRACE")
	if cpu == "" && mem == "" && tr == "" {
		return func() {}
	}
	var tf *os.File
	if tr != "" {
		f, err := os.Create(tr)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sofa: SOFA_TRACE: %v\n", err)
		} else {
			tf = f
		}
	}
	var cf *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sofa: SOFA_CPUPROFILE: %v\n", err)
		} else {
			cf = f
		}
	}
	return func() {
		if tf != nil {
			trace.Stop()
			_ = tf.Close()
		}
		if cf != nil {
			pprof.StopCPUProfile()
			_ = cf.Close()
		}
		if mem != "" {
			f, err := os.Create(mem)
			if err == nil {
				runtime.GC()
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sofa: SOFA_MEMPROFILE: %v\n", err)
			}
		}
	}
}
