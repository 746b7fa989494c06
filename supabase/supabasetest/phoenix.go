package supabasetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/supabase/internal/pgrest"
)

// binding is one postgres_changes subscription as the client asks for it.
type binding struct {
	Event  string `json:"event"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Filter string `json:"filter,omitempty"`
}

// Phoenix is a test stand-in for Supabase Realtime's WebSocket
// endpoint. It speaks the Phoenix V1 JSON serializer and sends the frames
// supabase/realtime sends (lib/realtime_web/channels/realtime_channel.ex,
// lib/extensions/postgres_cdc_rls/message_dispatcher.ex and
// replication_poller.ex):
//   - phx_reply to phx_join: {"status":"ok","response":{"postgres_changes":[{id,event,schema,table,filter}]}},
//     or {"status":"error","response":{"reason":"<Code>: <message>"}};
//   - then system {"extension":"postgres_changes","status":"ok","message":"Subscribed to PostgreSQL","channel":<name>};
//   - postgres_changes {"ids":[...],"data":{schema,table,commit_timestamp,type,columns,record,old_record,errors}};
//   - a channel shutdown: system {"extension":"system","status":"error","message":...} then phx_close;
//   - heartbeat replies on topic "phoenix".
type Phoenix struct {
	t      testing.TB
	apiKey string

	mu    sync.Mutex
	conns map[*phxConn]bool
	// joinErrors are the reasons the next joins are refused with, in order.
	joinErrors []string
	// expired tokens are refused at join and shut a channel when pushed.
	expired map[string]bool
	// badIDs makes join replies carry subscriptions other than those asked.
	badIDs bool

	silentHeartbeats atomic.Bool // stop answering heartbeats
	joins            atomic.Int32
	wg               sync.WaitGroup
	tokens           []string // every token seen in a join or access_token push
	joinTokens       []string // the token of each join, in order
	joinTimes        []time.Time
}

type phxConn struct {
	ws         *websocket.Conn
	wmu        sync.Mutex
	topic      string
	joinRef    string
	subs       []phxSub
	subscribed bool
}

type phxSub struct {
	id      int64
	b       binding
	offices map[string]bool // nil: all
}

// NewPhoenix returns a stand-in that accepts apiKey; t.Cleanup closes it.
func NewPhoenix(t testing.TB, apiKey string) *Phoenix {
	p := &Phoenix{t: t, apiKey: apiKey, conns: map[*phxConn]bool{}, expired: map[string]bool{}}
	t.Cleanup(p.Close)
	return p
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (p *Phoenix) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("apikey") != p.apiKey || r.URL.Query().Get("vsn") != "1.0.0" {
		http.Error(w, `{"message":"Invalid API key"}`, http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &phxConn{ws: ws}
	p.mu.Lock()
	p.conns[c] = true
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		ws.Close()
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var m struct {
			Topic   string          `json:"topic"`
			Event   string          `json:"event"`
			Payload json.RawMessage `json:"payload"`
			Ref     string          `json:"ref"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			p.t.Errorf("phoenix server: bad frame %q", data)
			return
		}
		switch {
		case m.Topic == "phoenix" && m.Event == "heartbeat":
			if !p.silentHeartbeats.Load() {
				c.send("phoenix", "phx_reply", map[string]any{"status": "ok", "response": map[string]any{}}, m.Ref)
			}
		case m.Event == "phx_join":
			if !p.join(c, m.Topic, m.Ref, m.Payload) {
				return
			}
		case m.Event == "access_token":
			var pl struct {
				AccessToken string `json:"access_token"`
			}
			json.Unmarshal(m.Payload, &pl)
			p.mu.Lock()
			p.tokens = append(p.tokens, pl.AccessToken)
			bad := p.expired[pl.AccessToken]
			p.mu.Unlock()
			if bad {
				p.shutdown(c, "Token has expired 2 seconds ago")
			}
		case m.Event == "phx_leave":
			c.send(m.Topic, "phx_reply", map[string]any{"status": "ok", "response": map[string]any{}}, m.Ref)
			c.send(m.Topic, "phx_close", map[string]any{}, c.joinRef)
		}
	}
}

// join answers a phx_join; false when the socket is to be closed.
func (p *Phoenix) join(c *phxConn, topic, ref string, payload json.RawMessage) bool {
	var pl struct {
		Config struct {
			PostgresChanges []binding `json:"postgres_changes"`
		} `json:"config"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(payload, &pl); err != nil {
		p.t.Errorf("phoenix server: bad join payload %s", payload)
		return false
	}
	p.joins.Add(1)
	p.mu.Lock()
	p.tokens = append(p.tokens, pl.AccessToken)
	p.joinTokens = append(p.joinTokens, pl.AccessToken)
	p.joinTimes = append(p.joinTimes, time.Now())
	var reason string
	if len(p.joinErrors) > 0 {
		reason, p.joinErrors = p.joinErrors[0], p.joinErrors[1:]
	} else if p.expired[pl.AccessToken] {
		reason = "InvalidJWTToken: Token has expired 12 seconds ago"
	}
	badIDs := p.badIDs
	p.mu.Unlock()
	if !strings.HasPrefix(topic, "realtime:") || topic == "realtime:" {
		reason = "TopicNameRequired: You must provide a topic name"
	}
	if reason != "" {
		c.send(topic, "phx_reply", map[string]any{"status": "error", "response": map[string]any{"reason": reason}}, ref)
		// A join rate limit also disconnects the socket.
		return !strings.HasPrefix(reason, "ClientJoinRateLimitReached")
	}
	var subs []phxSub
	var resp []map[string]any
	for _, b := range pl.Config.PostgresChanges {
		s := phxSub{id: rand.Int64N(1 << 27), b: b}
		if f := b.Filter; f != "" {
			col, list, ok := strings.Cut(f, "=in.(")
			if !ok || col != "office_id" || !strings.HasSuffix(list, ")") {
				p.t.Errorf("phoenix server: unexpected filter %q", f)
				return false
			}
			s.offices = map[string]bool{}
			for _, id := range strings.Split(strings.TrimSuffix(list, ")"), ",") {
				s.offices[id] = true
			}
		}
		subs = append(subs, s)
		rb := map[string]any{"id": s.id, "event": b.Event, "schema": b.Schema, "table": b.Table}
		if b.Filter != "" {
			rb["filter"] = b.Filter
		}
		if badIDs {
			rb["table"] = b.Table + "_other"
		}
		resp = append(resp, rb)
	}
	p.mu.Lock()
	c.topic, c.joinRef, c.subs = topic, ref, subs
	p.mu.Unlock()
	c.send(topic, "phx_reply", map[string]any{"status": "ok", "response": map[string]any{"postgres_changes": resp}}, ref)
	// The subscription is confirmed asynchronously, as the channel process
	// does once the replication subscription is in place.
	go func() {
		time.Sleep(5 * time.Millisecond)
		p.mu.Lock()
		c.subscribed = true
		p.mu.Unlock()
		c.send(topic, "system", map[string]any{"extension": "postgres_changes", "status": "ok",
			"message": "Subscribed to PostgreSQL", "channel": strings.TrimPrefix(topic, "realtime:")}, "")
	}()
	return true
}

func (c *phxConn) send(topic, event string, payload any, ref string) {
	var r any
	if ref != "" {
		r = ref
	}
	b, _ := json.Marshal(map[string]any{"topic": topic, "event": event, "payload": payload, "ref": r})
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteMessage(websocket.TextMessage, b)
}

// shutdown ends a channel as shutdown_response does: a system error, then
// the channel process stops normally and Phoenix sends phx_close.
func (p *Phoenix) shutdown(c *phxConn, message string) {
	p.mu.Lock()
	c.subscribed = false
	topic, ref := c.topic, c.joinRef
	p.mu.Unlock()
	c.send(topic, "system", map[string]any{"extension": "system", "status": "error", "message": message,
		"channel": strings.TrimPrefix(topic, "realtime:")}, "")
	c.send(topic, "phx_close", map[string]any{}, ref)
}

// ShutdownAll shuts down every joined channel with message.
func (p *Phoenix) ShutdownAll(message string) {
	for _, c := range p.snapshot() {
		p.shutdown(c, message)
	}
}

func (p *Phoenix) snapshot() []*phxConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs []*phxConn
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

// Drop closes every connection abruptly (no close frame), as a network
// failure does, waits for their handlers to see it, and returns how many
// connections it closed and how many of those had a joined channel. A
// client learns of the drop only when its read fails, so a test that drops
// again must first wait for the client's rejoin (Joins), not for what the
// client believes (its Connected may still be true for a moment).
func (p *Phoenix) Drop() (conns, joined int) {
	for _, c := range p.snapshot() {
		p.mu.Lock()
		if c.topic != "" {
			joined++
		}
		p.mu.Unlock()
		conns++
		c.ws.UnderlyingConn().Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(p.snapshot()) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return conns, joined
}

// Close drops every connection and waits for their handlers.
func (p *Phoenix) Close() {
	p.Drop()
	p.wg.Wait()
}

// Emit is pgrest's OnChange: it sends a committed change to every channel
// subscribed to it, as Realtime's replication poller does. Channels not
// subscribed at that moment never see it (Realtime does not replay).
func (p *Phoenix) Emit(ch pgrest.Change) {
	record, old := ch.Record, ch.OldRecord
	if ch.Table == "dependency_requests" {
		// Published with a column list without value, and replica identity
		// default: old_record holds the key only.
		record = without(record, "value")
		if old != nil {
			old = map[string]any{"id": old["id"]}
		}
	}
	row := record
	if row == nil {
		row = old
	}
	data := map[string]any{
		"schema":           ch.Schema,
		"table":            ch.Table,
		"commit_timestamp": ch.CommitTimestamp.UTC().Format("2006-01-02T15:04:05.000Z"),
		"type":             ch.Type,
		"columns":          columnsOf(row),
		"errors":           nil,
	}
	if ch.Type != "DELETE" {
		data["record"] = record
	}
	if ch.Type != "INSERT" {
		data["old_record"] = old
	}
	p.mu.Lock()
	type target struct {
		c     *phxConn
		topic string
		ids   []int64
	}
	var targets []target
	for c := range p.conns {
		if !c.subscribed {
			continue
		}
		var ids []int64
		for _, s := range c.subs {
			if s.b.Table != ch.Table || s.b.Schema != ch.Schema || (s.b.Event != "*" && s.b.Event != ch.Type) {
				continue
			}
			if s.offices != nil && !s.offices[fmt.Sprint(row["office_id"])] {
				continue
			}
			ids = append(ids, s.id)
		}
		if len(ids) > 0 {
			targets = append(targets, target{c, c.topic, ids})
		}
	}
	p.mu.Unlock()
	for _, tg := range targets {
		tg.c.send(tg.topic, "postgres_changes", map[string]any{"ids": tg.ids, "data": data}, "")
	}
}

func without(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

func columnsOf(row map[string]any) []map[string]string {
	var cols []map[string]string
	for k := range row {
		cols = append(cols, map[string]string{"name": k, "type": "text"})
	}
	return cols
}

// FailJoins makes the next joins fail with these reasons, in order (as
// Realtime words them: "<Code>: <message>"). A ClientJoinRateLimitReached
// reason also closes the socket, as Realtime disconnects it.
func (p *Phoenix) FailJoins(reasons ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.joinErrors = append(p.joinErrors, reasons...)
}

// ExpireTokens marks access tokens expired: a join with one is refused
// (InvalidJWTToken) and a push of one shuts the channel down.
func (p *Phoenix) ExpireTokens(tokens ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range tokens {
		p.expired[t] = true
	}
}

// Expired reports whether token was marked expired.
func (p *Phoenix) Expired(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expired[token]
}

// MismatchIDs makes join replies name tables other than those asked.
func (p *Phoenix) MismatchIDs(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.badIDs = on
}

// SilentHeartbeats stops (or resumes) answering heartbeats.
func (p *Phoenix) SilentHeartbeats(on bool) { p.silentHeartbeats.Store(on) }

// Joins returns how many joins the stand-in has received.
func (p *Phoenix) Joins() int { return int(p.joins.Load()) }

// Tokens returns every access token seen, in joins and pushes, in order.
func (p *Phoenix) Tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...)
}

// JoinTokens returns the access token of each join, in order.
func (p *Phoenix) JoinTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.joinTokens...)
}

// JoinTimes returns when each join arrived.
func (p *Phoenix) JoinTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.joinTimes...)
}
