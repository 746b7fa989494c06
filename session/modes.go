package session

// modeTracker follows DEC private mode 2004 (bracketed paste) in a byte
// stream, across chunk boundaries, without a full screen model: Claude Code
// sessions need only this bit of terminal state to know how to type.
type modeTracker struct {
	state   int // 0 ground, 1 ESC, 2 CSI '?', 3 CSI other
	param   int
	params  []int
	paste   bool
	touched bool // mode 2004 was set at least once
}

func (t *modeTracker) write(p []byte) {
	for _, c := range p {
		switch t.state {
		case 0:
			if c == 0x1b {
				t.state = 1
			}
		case 1:
			switch c {
			case '[':
				t.state, t.param, t.params = 3, 0, t.params[:0]
			case 0x1b:
			default:
				t.state = 0
			}
		case 3: // CSI, no '?' seen yet
			if c == '?' {
				t.state = 2
				continue
			}
			t.state = 0
			if c == 0x1b {
				t.state = 1
			}
		case 2:
			switch {
			case c >= '0' && c <= '9':
				if t.param < 1e6 {
					t.param = t.param*10 + int(c-'0')
				}
			case c == ';':
				t.params = append(t.params, t.param)
				t.param = 0
			case c == 'h' || c == 'l':
				t.params = append(t.params, t.param)
				for _, m := range t.params {
					if m == 2004 {
						t.paste = c == 'h'
						t.touched = true
					}
				}
				t.state = 0
			case c == 0x1b:
				t.state = 1
			default:
				if c >= 0x40 && c <= 0x7e {
					t.state = 0 // some other final byte
				}
			}
		}
	}
}
