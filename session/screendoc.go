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
// instead of blanks) is the same line. Blank lines have key 0.
func lineKey(l string) uint64 {
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

// alignment follows one paint of the screen (the rows a program draws
// after it cleared the screen, or the visible rows at a turn's end) line
// by line against the document, deciding for each whether it is new.
//
// It first looks for where the paint starts in the document (the anchor):
// the first non-blank line and the next must match consecutive lines of the
// document at or after minJ; until that is decided the lines are held.
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
			a.anchorAt(len(keys), emit)
			a.place(l, k, emit)
			return
		}
		a.held = append(a.held, heldLine{l, k})
		a.matched = 1
		return
	}
	next := a.cands[:0]
	atEnd := false
	for _, c := range a.cands {
		if c == len(keys) {
			atEnd = true
		}
		if c < len(keys) && keys[c] == k {
			next = append(next, c+1)
		}
	}
	a.cands = next
	if len(next) == 0 {
		if atEnd {
			// The held lines were the document's last ones: old.
			a.held = a.held[:0]
			a.anchorAt(len(keys), nil)
			a.place(l, k, emit)
			return
		}
		// Not a repaint of the document: the held lines are new.
		a.anchorAt(len(keys), emit)
		a.place(l, k, emit)
		return
	}
	a.held = append(a.held, heldLine{l, k})
	a.matched++
	if a.matched >= anchorRun {
		// The most recent place wins: a viewport shows the latest lines.
		a.held = a.held[:0]
		a.anchorAt(slices.Max(next), nil)
	}
}

// anchorAt fixes the place the paint goes on from at document line p;
// the held lines, if emit is given, are new and go before it.
func (a *alignment) anchorAt(p int, emit func(string)) {
	a.anchored, a.p = true, p
	held := a.held
	a.held, a.cands = nil, nil
	if emit == nil {
		return
	}
	for _, h := range held {
		a.place(h.text, h.key, func(s string) { emit(s) })
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
		if len(a.held) > 0 && slices.Contains(a.cands, end) {
			a.held = a.held[:0]
			a.anchorAt(end, nil)
		} else {
			a.anchorAt(end, emit)
		}
	}
	if full && a.p < len(a.doc.keys) {
		a.doc.keys = a.doc.keys[:a.p]
	}
	a.doc.trim()
}
