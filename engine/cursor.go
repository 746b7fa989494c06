package engine

import (
	"context"
	"encoding/json"

	"github.com/office-server/office-server/office"
)

// The transcript resume cursor.
//
// A Claude Code agent's words come from its transcript, whose entry uuids
// are stable across server restarts. After each turn end the office has
// fully acted on (every message of the turn handled, the parser flushed), it
// appends a "transcript.cursor" event naming the turn's last chunk and the
// conversation. When it starts the agent's session again after a server
// restart, the newest cursor of the same conversation becomes
// session.Spec.TranscriptAfter, so the entries before it are not read,
// parsed or acted on again.
//
// The cursor is at a turn end on purpose: the parser is empty there, so
// reading on from it parses exactly as the first reading did, and the
// messages get the same dedupe keys. When the server stopped mid-turn (some
// of the turn's messages acted on, no cursor yet), the cursor is older than
// the last acted message: the turn is read again and its messages, already
// in the event log, are not acted on twice (dedupe, replay mode).

// cursorEvent is the kind of the cursor events.
const cursorEvent = "transcript.cursor"

// cursor is a transcript position: the conversation and the last chunk ID
// acted on; event is the ID of the event that recorded it.
type cursor struct {
	Conversation string `json:"conversation_id"`
	After        string `json:"after"`
	event        int64
}

// recordCursor records that the turn ending with chunk id was acted on.
func (dp *dispatcher) recordCursor(ctx context.Context, d *desk, id string) {
	k := d.key
	rec, err := dp.store.GetSessionByAgent(ctx, k.agentID)
	if err != nil || rec.AgentSessionID == "" {
		return
	}
	c := cursor{Conversation: rec.AgentSessionID, After: id}
	ev, inserted, err := dp.store.AppendEvent(ctx, office.Event{OfficeID: k.officeID, AgentID: k.agentID, Kind: cursorEvent,
		Payload: json.RawMessage(mustJSON(c)), DedupeKey: id + "#cursor"})
	if err != nil {
		dp.log.Warn("record transcript cursor", "office", k.officeID, "agent", k.agentID, "err", err)
		return
	}
	if !inserted {
		return
	}
	c.event = ev.ID
	d.newerCursor(c)
}

// newerCursor keeps c as the desk's cursor if it is newer.
func (d *desk) newerCursor(c cursor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.event > d.cursor.event {
		d.cursor = c
	}
}

// transcriptCursor returns the newest cursor recorded for the agent's
// conversation ("" when there is none). The event log is scanned once per
// agent and server life (from the newest cursor known in memory on).
func (dl *deliverer) transcriptCursor(ctx context.Context, k agentKey, conversation string) string {
	d := dl.desk(k)
	d.mu.Lock()
	c := d.cursor
	d.mu.Unlock()
	after := c.event
	for {
		evs, err := dl.store.ListEvents(ctx, office.EventFilter{OfficeID: k.officeID, AgentID: k.agentID, AfterID: after, Limit: 1000})
		if err != nil {
			dl.log.Warn("read transcript cursor", "office", k.officeID, "agent", k.agentID, "err", err)
			break
		}
		for _, ev := range evs {
			after = max(after, ev.ID)
			if ev.Kind != cursorEvent || ev.ID <= c.event {
				continue
			}
			var x cursor
			if json.Unmarshal(ev.Payload, &x) == nil && x.After != "" {
				x.event = ev.ID
				c = x
			}
		}
		if len(evs) < 1000 {
			break
		}
	}
	d.newerCursor(c)
	if c.Conversation != conversation {
		// A cursor of another conversation would make the new transcript
		// count as read.
		return ""
	}
	return c.After
}
