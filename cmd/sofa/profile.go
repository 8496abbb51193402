package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles is a developer hook: SOFA_CPUPROFILE=FILE writes a pprof
// CPU profile of the whole run, SOFA_MEMPROFILE=FILE an allocation
// profile at the end (go tool pprof -sample_index=alloc_space). Neither is
// a flag: they are for measuring sofa, not for its users. The returned
// function ends the profiles; failures are printed and otherwise ignored.
func startProfiles() (stop func()) {
	cpu, mem := os.Getenv("SOFA_CPUPROFILE"), os.Getenv("SOFA_MEMPROFILE")
	if cpu == "" && mem == "" {
		return func() {}
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
