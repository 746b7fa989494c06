package protocol

import "strings"

// DefaultMaxLineBytes is the default limit on one line held by a Splitter.
const DefaultMaxLineBytes = 64 << 10

// Splitter cuts a byte stream, delivered in chunks of any size, into lines
// for a Parser. A line ends at "\n", "\r\n" or a lone "\r" (a terminal
// program redrawing a line starts it again with "\r"; each version is a
// line). The line terminator is not part of the line. A line longer than
// the limit is cut into pieces of the limit's size, so memory is bounded.
// The zero value is ready to use with DefaultMaxLineBytes.
type Splitter struct {
	// MaxLineBytes bounds a line; zero means DefaultMaxLineBytes.
	MaxLineBytes int

	buf []byte // the start of an unfinished line
	cr  bool   // the last byte seen was '\r': a following '\n' ends nothing
}

// Split consumes p and calls fn with every line it completes, in order.
// The string passed to fn is valid after fn returns (it may share memory
// with other lines of the same call, never with p).
func (s *Splitter) Split(p []byte, fn func(line string)) {
	max := s.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	if len(p) == 0 {
		return
	}
	if s.cr && p[0] == '\n' {
		p = p[1:]
	}
	s.cr = false
	// One string per chunk: the lines are substrings of it.
	str := string(p)
	start := 0
	cr := strings.IndexByte(str, '\r') // the next '\r' at or after start, or -1
	for start < len(str) {
		end := strings.IndexByte(str[start:], '\n')
		if end >= 0 {
			end += start
		}
		if cr >= 0 && cr < start {
			if cr = strings.IndexByte(str[start:], '\r'); cr >= 0 {
				cr += start
			}
		}
		if cr >= 0 && (end < 0 || cr < end) {
			end = cr
		}
		if end < 0 {
			break
		}
		s.emit(str[start:end], max, fn)
		next := end + 1
		if str[end] == '\r' {
			if next < len(str) && str[next] == '\n' {
				next++
			} else if next == len(str) {
				s.cr = true
			}
		}
		start = next
	}
	if start < len(str) {
		s.buf = append(s.buf, str[start:]...)
		for len(s.buf) > max {
			n := cutAt(s.buf, max)
			fn(string(s.buf[:n]))
			s.buf = append(s.buf[:0], s.buf[n:]...)
		}
	}
}

// emit completes a line whose tail is tail.
func (s *Splitter) emit(tail string, max int, fn func(string)) {
	line := tail
	if len(s.buf) > 0 {
		line = string(append(s.buf, tail...))
		s.buf = s.buf[:0]
	}
	for len(line) > max {
		n := cutAt([]byte(line[:max+1]), max)
		fn(line[:n])
		line = line[n:]
	}
	fn(line)
}

// cutAt returns where to cut b, at most max bytes in, without splitting a
// UTF-8 character (unless b is not UTF-8 at all).
func cutAt(b []byte, max int) int {
	n := max
	for n > 0 && n > max-4 && b[n]&0xC0 == 0x80 {
		n--
	}
	if n == 0 || b[n]&0xC0 == 0x80 {
		return max
	}
	return n
}

// Flush passes an unfinished last line, if any, to fn.
func (s *Splitter) Flush(fn func(line string)) {
	s.cr = false
	if len(s.buf) > 0 {
		line := string(s.buf)
		s.buf = s.buf[:0]
		fn(line)
	}
}
