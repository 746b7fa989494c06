package session

import (
	"hash/maphash"
	"slices"
	"strings"
)

// A screen document is what a command agent has shown so far, as the lines
// a person would read top to bottom: every line read off its screen (said,
// typed, or the program's own furniture), each kept as the hash of its
// words (blank lines are left out). When the program clears its screen and
// paints its history again, or scrolls it inside the alternate screen, what
// it paints is aligned against the document: lines the document already
// holds, in the same order, were read before and are not dispatched again;
// lines in between are new. docs/notes/screen.md ("Repaints") gives the
// reasoning and the limits.

// maxDocLines bounds the document; the oldest lines are forgotten beyond
// it (a program that repaints more history than that from its first line
// on would be read again from there).
const maxDocLines = 1 << 16

var docSeed = maphash.MakeSeed()

// lineKey is a line's identity in the document: its words, so that a
// repaint drawing the spaces between words differently (cursor moves
// instead of blanks) is the same line, without a scroll bar a TUI draws in
// the last column while its history overflows (Qwen Code's │ and █). Blank
// lines have key 0.
func lineKey(l string) uint64 {
	l = strings.TrimRightFunc(l, func(r rune) bool { return r == ' ' || r == '│' || r == '█' || r == '┃' || r == '▐' })
	f := strings.Fields(l)
	if len(f) == 0 {
		return 0
	}
	return maphash.String(docSeed, strings.Join(f, " "))
}

// screenDoc is the document: the keys of the non-blank lines, oldest first.
type screenDoc struct {
	keys []uint64
}

// trim forgets the oldest lines beyond maxDocLines.
func (d *screenDoc) trim() {
	if over := len(d.keys) - maxDocLines; over > 0 {
		d.keys = append(d.keys[:0], d.keys[over+maxDocLines/8:]...)
	}
}

// anchorRun is how many consecutive non-blank lines must match the
// document, in order, before a painted region is taken for a repaint of
// it; fewer suffice when the document ends there.
const anchorRun = 2

// maxLead is how many lines at the top of a paint may match nothing and
// still be taken for old when the lines after them are a repaint (a
// paragraph at the top of a viewport, wrapped anew after a resize).
const maxLead = 2

// alignment follows one paint of the screen (the rows a program draws
// after it cleared the screen, or the visible rows at a turn's end) line
// by line against the document, deciding for each whether it is new.
//
// It first looks for where the paint starts in the document (the anchor):
// the first non-blank line and the next must match consecutive lines of the
// document at or after minJ; where several places match, the lines are
// held until one place matches longer than the others (the most recent of
// the longest wins).
// Then each line is compared with the next line of the document; a line
// found a little further on (within skip lines: what the program no longer
// shows, such as last turn's spinner or input box, is passed over) is old
// too; any other line is new and is inserted into the document where it
// stands. A paint that does not start with lines of the document is new
// from its first line.
type alignment struct {
	doc  *screenDoc
	minJ int // the lowest document line an anchor may be at
	skip int // how far ahead a line may be found and still count as old

	anchored bool
	cands    []int      // document positions matching the held lines so far (the next expected)
	lead     []heldLine // lines at the top of the paint that match nothing (a paragraph wrapped anew)
	held     []heldLine // lines waiting for the anchor
	matched  int        // non-blank held lines matched so far
	p        int        // the next document line expected, once anchored
	lastNew  bool       // the last non-blank line was new (a blank after it is too)
}

type heldLine struct {
	text string
	key  uint64
}

func newAlignment(doc *screenDoc, minJ, skip int) *alignment {
	return &alignment{doc: doc, minJ: max(minJ, 0), skip: skip}
}

// feed takes the next line of the paint; new lines are passed to emit, in
// order.
func (a *alignment) feed(l string, emit func(string)) {
	k := lineKey(l)
	if a.anchored {
		a.place(l, k, emit)
		return
	}
	if k == 0 {
		if len(a.held) > 0 {
			a.held = append(a.held, heldLine{l, k})
		}
		return
	}
	keys := a.doc.keys
	if len(a.held) == 0 {
		a.cands = a.cands[:0]
		for j := a.minJ; j < len(keys); j++ {
			if keys[j] == k {
				a.cands = append(a.cands, j+1)
			}
		}
		if len(a.cands) == 0 {
			if len(a.lead) < maxLead {
				a.lead = append(a.lead, heldLine{l, k})
				return
			}
			a.anchorAt(len(keys), emit)
			a.place(l, k, emit)
			return
		}
		a.held = append(a.held, heldLine{l, k})
		a.matched = 1
		return
	}
	next := make([]int, 0, len(a.cands))
	atEnd := false
	for _, c := range a.cands {
		if c == len(keys) {
			atEnd = true
		}
		if c < len(keys) && keys[c] == k {
			next = append(next, c+1)
		}
	}
	if len(next) == 0 {
		switch {
		case a.matched >= anchorRun:
			// The held lines repaint the document where the longest
			// run of them matched (the most recent such place).
			a.anchorAt(slices.Max(a.cands), nil)
		case atEnd && len(a.lead) == 0:
			// The held lines were the document's last ones: old.
			a.anchorAt(len(keys), nil)
		default:
			// Not a repaint of the document: the held lines are new.
			a.anchorAt(len(keys), emit)
		}
		a.place(l, k, emit)
		return
	}
	a.cands = next
	a.held = append(a.held, heldLine{l, k})
	a.matched++
	if a.matched >= anchorRun && len(next) == 1 {
		a.anchorAt(next[0], nil)
	}
}

// anchorAt fixes the place the paint goes on from at document line p.
// The lines still waiting (leading ones that matched nothing, then the
// held ones) are old and forgotten when emit is nil; else they are new,
// emitted and placed from p on.
func (a *alignment) anchorAt(p int, emit func(string)) {
	a.anchored, a.p = true, p
	waiting := append(a.lead, a.held...)
	a.held, a.cands, a.lead = nil, nil, nil
	if emit == nil {
		return
	}
	for _, h := range waiting {
		a.place(h.text, h.key, emit)
	}
}

// place decides an anchored line: the next document line, one a little
// further on, or new.
func (a *alignment) place(l string, k uint64, emit func(string)) {
	if k == 0 {
		if a.lastNew {
			emit(l)
		}
		return
	}
	keys := a.doc.keys
	for q := a.p; q < len(keys) && q <= a.p+a.skip; q++ {
		if keys[q] == k {
			a.p, a.lastNew = q+1, false
			return
		}
	}
	a.doc.keys = slices.Insert(keys, a.p, k)
	a.p++
	a.lastNew = true
	emit(l)
}

// finish ends the paint. A paint that ended before its anchor was decided
// is old when its lines are the document's last ones, else new. When the
// paint was the whole screen (full), the document lines after it are gone
// from the screen for good (a spinner, last turn's input box) and are
// forgotten, so the next paint is aligned against what the program shows.
func (a *alignment) finish(full bool, emit func(string)) {
	if !a.anchored {
		end := len(a.doc.keys)
		switch {
		case len(a.held) > 0 && a.matched >= anchorRun:
			a.anchorAt(slices.Max(a.cands), nil)
		case len(a.held) > 0 && len(a.lead) == 0 && slices.Contains(a.cands, end):
			a.anchorAt(end, nil)
		default:
			a.anchorAt(end, emit)
		}
	}
	if full && a.p < len(a.doc.keys) {
		a.doc.keys = a.doc.keys[:a.p]
	}
	a.doc.trim()
}
