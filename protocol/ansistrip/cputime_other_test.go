//go:build !unix

package ansistrip

import "time"

func cpuTime() time.Duration { return 0 }
