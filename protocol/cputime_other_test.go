//go:build !unix

package protocol

import "time"

func cpuTime() time.Duration { return 0 }
