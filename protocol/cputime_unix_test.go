//go:build unix

package protocol

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system). On the
// shared machines the benchmarks run on, wall time includes the time other
// processes held the CPU; CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
