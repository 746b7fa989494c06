package session

import "bytes"

// lastOSC returns the value of the last operating-system command in
// tail+p that begins with start and ends at one of stops (or cur when
// there is none), and the tail to prepend to the next output: a command
// cut off by the end of p (at most keep bytes of it), or the last bytes
// that could begin start.
func lastOSC(start []byte, stops string, keep int, cur string, tail, p []byte) (string, []byte) {
	buf := append(tail, p...)
	for {
		i := bytes.Index(buf, start)
		if i < 0 {
			break
		}
		rest := buf[i+len(start):]
		j := bytes.IndexAny(rest, stops)
		if j < 0 {
			// Cut off: keep it for the next output.
			return cur, append([]byte(nil), buf[i:min(len(buf), i+keep)]...)
		}
		cur = string(rest[:j])
		buf = rest[j:]
	}
	n := min(len(buf), len(start)-1)
	return cur, append([]byte(nil), buf[len(buf)-n:]...)
}
