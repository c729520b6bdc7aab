// Go's SIGPROF handler cost per sample, for the figure beside the engine's and pprof-rs's in the crate
// README: the thread signals itself with tgkill under 20 nested Go frames while the runtime's CPU profiling
// is on (at 1 Hz, so its own timer adds next to nothing), as benches/pprof-rs-compare does for the two
// Rust profilers. Read `runtime.sigprof`'s inclusive instructions and its call count under callgrind:
//
//	cd benches/go && go build -o /tmp/handlercost ./handlercost
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/go-cg.out /tmp/handlercost
//	callgrind_annotate --inclusive=yes --tree=caller /tmp/go-cg.out | grep -A1 'runtime.sighandler (' | grep 'runtime.sigprof'
package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// nested calls f from the bottom of n frames of its own.
//
//go:noinline
func nested(n int, f func()) int {
	if n == 0 {
		f()
		return 0
	}
	return nested(n-1, f) + 1
}

func main() {
	// Every signal must reach this thread's handler with this goroutine on it.
	runtime.LockOSThread()
	runtime.SetCPUProfileRate(1)
	pid, tid := syscall.Getpid(), syscall.Gettid()
	const signals = 5000
	nested(20, func() {
		for i := 0; i < signals; i++ {
			if err := syscall.Tgkill(pid, tid, syscall.SIGPROF); err != nil {
				fmt.Fprintln(os.Stderr, "tgkill:", err)
				os.Exit(1)
			}
		}
	})
	fmt.Fprintf(os.Stderr, "%d self-signals at depth 20\n", signals)
}
