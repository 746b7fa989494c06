package supabasetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/office-server/office-server/supabase/internal/signing"
)

// Phoenix is a test stand-in for Supabase Realtime's WebSocket endpoint
// and its postgres_changes extension, written after supabase/realtime's
// source (each behaviour and its source line: docs/notes/supabase.md,
// "The Realtime stand-in"):
//   - the Phoenix serializers 1.0.0 (JSON objects) and 2.0.0 (JSON arrays
//     [join_ref, ref, topic, event, payload]), chosen by the vsn parameter;
//   - the socket's apikey (the role JWT the gateway put in place of an sb_
//     key) and the join's access_token are project JWTs (HS256 under the
//     secret, ES256/RS256 by kid under the published keys), with role and
//     exp required; a refused join is answered after a delay
//     (JoinErrorDelay, as channel_error_backoff_ms);
//   - a joined channel whose token expires is shut down ("Token has expired
//     N seconds ago", then phx_close) as confirm_token's timer does: for a
//     server on an sb_ key that is the gateway's short-lived JWT;
//   - every filter operator of postgres_changes (eq, neq, lt, lte, gt, gte,
//     in, like, ilike, is, match, imatch, isdistinct, with not.), several
//     joined by commas;
//   - changes read from the WAL through a temporary logical slot with
//     wal2json, polled as ReplicationPoller polls (again at once after a
//     batch, PollInterval+jitter when the slot had changes for nobody,
//     5×PollInterval when idle), and sent to each subscriber only if its
//     role may select the row's primary key, the row passes its filters and,
//     for a table with row-level security, the row is visible to its role
//     and claims; the record holds only the columns its role may select;
//   - a new access_token re-subscribes and says "Subscribed to PostgreSQL"
//     again, as the real channel does.
//
// Fault switches: Drop, ShutdownAll, FailJoins, ExpireTokens,
// SilentHeartbeats, MismatchIDs, ResendSubscribed, LoseChanges and
// DropChanges.
type Phoenix struct {
	t    testing.TB
	keys *signing.Keys

	// PollInterval is the slot's poll interval (poll_interval_ms, 100 ms
	// by default as in Realtime). Set before the first subscriber.
	PollInterval time.Duration
	// JoinErrorDelay is how long a refused join waits before its reply
	// (channel_error_backoff_ms: 5 s in production, 100 ms in Realtime's
	// own tests and here).
	JoinErrorDelay time.Duration

	pool *pgxpool.Pool // nil: no database, no changes

	mu    sync.Mutex
	conns map[*phxConn]bool
	// joinErrors are the reasons the next joins are refused with, in order.
	joinErrors []string
	// expired tokens are refused at join and shut a channel when pushed.
	expired map[string]bool
	// badIDs makes join replies carry subscriptions other than those asked.
	badIDs bool
	// lose drops every change polled while set; dropNext drops that many.
	lose     bool
	dropNext int

	silentHeartbeats atomic.Bool
	firstUnanswered  atomic.Int64 // unix ns of the first heartbeat left unanswered; 0: none
	joins            atomic.Int32
	polls            atomic.Int64
	delivered        atomic.Int64
	wg               sync.WaitGroup
	stop             chan struct{}
	tokens           []string // every token seen in a join or access_token push
	joinTokens       []string // the token of each join, in order
	joinTimes        []time.Time
}

type phxConn struct {
	ws  *websocket.Conn
	v2  bool
	wmu sync.Mutex

	// guarded by Phoenix.mu
	topic, joinRef string
	subs           []phxSub
	token          string
	role           string
	claims         map[string]any
	exp            int64 // the joined token's exp; 0: none to watch
	subscribed     bool
	// subsErr is why the channel's subscription fails ("Error parsing
	// `filter` params: …"); "" when it does not.
	subsErr string
}

type phxSub struct {
	id     int64
	event  string
	schema string
	table  string
	filter []rtFilter
}

type rtFilter struct {
	col, op, val string
	negate       bool
}

// NewPhoenix returns a stand-in that accepts JWTs signed with keys and,
// when databaseURL is not empty, reads that database's WAL (wal_level
// logical and wal2json required: scripts/setup.sh). t.Cleanup closes it.
func NewPhoenix(t testing.TB, keys *signing.Keys, databaseURL string) *Phoenix {
	t.Helper()
	p := &Phoenix{t: t, keys: keys, conns: map[*phxConn]bool{}, expired: map[string]bool{},
		PollInterval: 100 * time.Millisecond, JoinErrorDelay: 100 * time.Millisecond, stop: make(chan struct{})}
	if databaseURL != "" {
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, databaseURL)
		if err != nil {
			t.Fatalf("realtime stand-in: %v", err)
		}
		p.pool = pool
		if _, err := pool.Exec(ctx, realtimeSQL); err != nil {
			t.Fatalf("realtime stand-in schema: %v", err)
		}
		slot := fmt.Sprintf("realtime_standin_%d", rand.Int64N(1<<40))
		conn, err := pgx.Connect(ctx, databaseURL)
		if err != nil {
			t.Fatalf("realtime stand-in: %v", err)
		}
		// Replications.prepare_replication: a temporary wal2json slot,
		// released with its connection.
		if _, err := conn.Exec(ctx, `select 1 from pg_create_logical_replication_slot($1, 'wal2json', true)`, slot); err != nil {
			conn.Close(ctx)
			t.Fatalf("realtime stand-in: create slot (wal_level must be logical, wal2json installed; run scripts/setup.sh): %v", err)
		}
		p.wg.Add(1)
		go p.poll(conn, slot)
	}
	t.Cleanup(p.Close)
	return p
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// verify checks a project JWT as ChannelsAuthorization does: a valid
// signature, then role and exp present, then exp in the future. The
// reasons are the channel's (realtime_channel.ex join: MalformedJWT for a
// token that is not a JWT, JwtSignatureError for a bad signature,
// JwtSignerError for an algorithm it has no signer for or a kid not in
// the JWKS: jwt_verification.ex generate_signer).
func (p *Phoenix) verify(token string) (map[string]any, string, error) {
	claims, err := p.keys.Verify(token)
	switch {
	case errors.Is(err, signing.ErrSignature):
		return nil, "", errors.New("JwtSignatureError: Failed to validate JWT signature")
	case errors.Is(err, signing.ErrAlgorithm):
		return nil, "", errors.New("JwtSignerError: Failed to generate JWT signer, check your JWT secret or JWKS configuration")
	case errors.Is(err, signing.ErrKey):
		return nil, "", fmt.Errorf("JwtSignerError: Failed to generate JWT signer for key ID (kid) %q, check your JWT secret or JWKS configuration", signing.KID(token))
	case err != nil:
		return nil, "", errors.New("MalformedJWT: The token provided is not a valid JWT")
	}
	role, _ := claims["role"].(string)
	exp, has, err := signing.Exp(claims)
	if role == "" || !has || err != nil {
		return nil, "", errors.New("InvalidJWTToken: Fields `role` and `exp` are required in JWT")
	}
	if now := time.Now().Unix(); exp <= now {
		return nil, "", fmt.Errorf("InvalidJWTToken: Token has expired %d seconds ago", now-exp)
	}
	p.mu.Lock()
	bad := p.expired[token]
	p.mu.Unlock()
	if bad {
		return nil, "", errors.New("InvalidJWTToken: Token has expired 12 seconds ago")
	}
	return claims, role, nil
}

func (p *Phoenix) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	vsn := q.Get("vsn")
	if vsn == "" {
		vsn = "1.0.0" // Phoenix.Socket's default
	}
	if vsn != "1.0.0" && vsn != "2.0.0" {
		http.Error(w, "unsupported serializer version "+vsn, http.StatusForbidden)
		return
	}
	key := q.Get("apikey")
	if key == "" {
		key = r.Header.Get("apikey")
	}
	if key == "" {
		http.Error(w, `{"message":"API key is missing or not a valid string"}`, http.StatusUnauthorized)
		return
	}
	if _, _, err := p.verify(key); err != nil {
		http.Error(w, `{"message":"`+err.Error()+`"}`, http.StatusForbidden)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &phxConn{ws: ws, v2: vsn == "2.0.0", token: key}
	p.mu.Lock()
	p.conns[c] = true
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	done := make(chan struct{})
	defer func() {
		close(done)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		ws.Close()
	}()
	p.wg.Add(1)
	go p.confirmTokens(c, done)
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := decodeFrame(data, c.v2)
		if err != nil {
			p.t.Errorf("realtime stand-in: bad frame %q: %v", data, err)
			return
		}
		switch {
		case m.Topic == "phoenix" && m.Event == "heartbeat":
			if !p.silentHeartbeats.Load() {
				c.send("phoenix", "phx_reply", map[string]any{"status": "ok", "response": map[string]any{}}, m.Ref, "")
			} else {
				p.firstUnanswered.CompareAndSwap(0, time.Now().UnixNano())
			}
		case m.Event == "phx_join":
			if !p.join(c, m) {
				return
			}
		case m.Event == "access_token":
			p.accessToken(c, m)
		case m.Event == "phx_leave":
			p.mu.Lock()
			jr := c.joinRef
			c.subscribed, c.subs, c.topic = false, nil, ""
			p.mu.Unlock()
			c.send(m.Topic, "phx_reply", map[string]any{"status": "ok", "response": map[string]any{}}, m.Ref, m.JoinRef)
			c.send(m.Topic, "phx_close", map[string]any{}, jr, jr)
		}
	}
}

type frame struct {
	JoinRef, Ref, Topic, Event string
	Payload                    json.RawMessage
}

// decodeFrame reads a text frame of either serializer.
func decodeFrame(data []byte, v2 bool) (frame, error) {
	var f frame
	if v2 {
		var a []json.RawMessage
		if err := json.Unmarshal(data, &a); err != nil || len(a) != 5 {
			return f, fmt.Errorf("not a 2.0.0 array of 5")
		}
		str := func(r json.RawMessage) string { var s string; json.Unmarshal(r, &s); return s }
		return frame{JoinRef: str(a[0]), Ref: str(a[1]), Topic: str(a[2]), Event: str(a[3]), Payload: a[4]}, nil
	}
	var m struct {
		Topic   string          `json:"topic"`
		Event   string          `json:"event"`
		Payload json.RawMessage `json:"payload"`
		Ref     *string         `json:"ref"`
		JoinRef *string         `json:"join_ref"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return f, err
	}
	f = frame{Topic: m.Topic, Event: m.Event, Payload: m.Payload}
	if m.Ref != nil {
		f.Ref = *m.Ref
	}
	if m.JoinRef != nil {
		f.JoinRef = *m.JoinRef
	}
	return f, nil
}

// parseFilter parses a postgres_changes filter as
// Subscriptions.parse_subscription_params does: "col=[not.]op.value",
// several joined by commas (in.(…) lists keep their commas).
func parseFilter(s string) ([]rtFilter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, s[start:])
	var out []rtFilter
	for _, part := range parts {
		col, rest, ok := strings.Cut(part, "=")
		if !ok || col == "" {
			//lint:ignore ST1005 Realtime\'s own message, which clients see as is
			return nil, fmt.Errorf("Error parsing `filter` params: %q", part)
		}
		f := rtFilter{col: col}
		if strings.HasPrefix(rest, "not.") {
			f.negate, rest = true, rest[4:]
		}
		op, val, ok := strings.Cut(rest, ".")
		switch op {
		case "eq", "neq", "lt", "lte", "gt", "gte", "in", "like", "ilike", "is", "match", "imatch", "isdistinct":
		default:
			ok = false
		}
		if !ok {
			//lint:ignore ST1005 Realtime\'s own message, which clients see as is
			return nil, fmt.Errorf("Error parsing `filter` params: [%q, %q]", op, val)
		}
		if op == "in" {
			// (a,b) → the array literal {a,b}
			if !strings.HasPrefix(val, "(") || !strings.HasSuffix(val, ")") {
				//lint:ignore ST1005 Realtime\'s own message, which clients see as is
				return nil, fmt.Errorf("Error parsing `filter` params: in needs (…): %q", val)
			}
			val = "{" + val[1:len(val)-1] + "}"
		}
		f.op, f.val = op, val
		out = append(out, f)
	}
	return out, nil
}

// joinPayload is what the stand-in reads of a phx_join.
type joinPayload struct {
	Config struct {
		PostgresChanges []map[string]any `json:"postgres_changes"`
	} `json:"config"`
	AccessToken string `json:"access_token"`
}

// join answers a phx_join; false when the socket is to be closed.
func (p *Phoenix) join(c *phxConn, m frame) bool {
	var pl joinPayload
	if err := json.Unmarshal(m.Payload, &pl); err != nil {
		p.t.Errorf("realtime stand-in: bad join payload %s", m.Payload)
		return false
	}
	p.joins.Add(1)
	token := pl.AccessToken
	if token == "" || strings.HasPrefix(token, "sb_") {
		token = c.token // assign_access_token: the socket's key
	}
	reason, badIDs := p.recordJoin(pl.AccessToken)
	var claims map[string]any
	var role string
	if reason == "" {
		var err error
		if claims, role, err = p.verify(token); err != nil {
			reason = err.Error()
		}
	}
	if m.Topic == "realtime:" || !strings.HasPrefix(m.Topic, "realtime:") {
		reason = "TopicNameRequired: You must provide a topic name"
	}
	subs, resp, subsErr := joinSubs(pl.Config.PostgresChanges, badIDs)
	if reason != "" {
		time.Sleep(p.JoinErrorDelay) // join_error: Process.sleep(channel_error_backoff_ms())
		c.send(m.Topic, "phx_reply", map[string]any{"status": "error", "response": map[string]any{"reason": reason}}, m.Ref, m.JoinRef)
		// A join rate limit also disconnects the socket.
		return !strings.HasPrefix(reason, "ClientJoinRateLimitReached")
	}
	p.mu.Lock()
	c.topic, c.joinRef, c.subs, c.role, c.claims, c.token, c.subsErr = m.Topic, m.JoinRef, subs, role, claims, token, subsErr
	c.exp, _, _ = signing.Exp(claims)
	if c.joinRef == "" {
		c.joinRef = m.Ref // serializer 1.0.0 has no join_ref
	}
	p.mu.Unlock()
	c.send(m.Topic, "phx_reply", map[string]any{"status": "ok", "response": map[string]any{"postgres_changes": resp}}, m.Ref, m.JoinRef)
	if len(subs) > 0 {
		p.subscribeLater(c)
	}
	return true
}

// recordJoin notes a join's token and time, and returns the reason the
// join is to be refused with (FailJoins; "" for none) and whether its
// reply is to carry other subscriptions (MismatchIDs).
func (p *Phoenix) recordJoin(token string) (reason string, badIDs bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens = append(p.tokens, token)
	p.joinTokens = append(p.joinTokens, token)
	p.joinTimes = append(p.joinTimes, time.Now())
	if len(p.joinErrors) > 0 {
		reason, p.joinErrors = p.joinErrors[0], p.joinErrors[1:]
	}
	return reason, p.badIDs
}

// joinSubs makes a subscription of each postgres_changes binding of a
// join, and the bindings the join reply carries (each with its id; with
// badIDs, another table). subsErr is why the subscription will fail: the
// first malformed filter; "" when none is.
func joinSubs(bindings []map[string]any, badIDs bool) (subs []phxSub, resp []map[string]any, subsErr string) {
	for _, b := range bindings {
		str := func(k string) string { s, _ := b[k].(string); return s }
		s := phxSub{id: rand.Int64N(1 << 27), event: str("event"), schema: str("schema"), table: str("table")}
		if s.schema == "" {
			s.schema = "public"
		}
		fs, err := parseFilter(str("filter"))
		if err != nil && subsErr == "" {
			// A malformed filter fails the subscription, not the join
			// (cdc_rls.ex subscription_list: :malformed_subscription_params).
			subsErr = err.Error()
		}
		s.filter = fs
		subs = append(subs, s)
		rb := map[string]any{"id": s.id}
		for k, v := range b {
			rb[k] = v
		}
		if badIDs {
			rb["table"] = s.table + "_other"
		}
		resp = append(resp, rb)
	}
	if resp == nil {
		resp = []map[string]any{}
	}
	return subs, resp, subsErr
}

// subscribeLater confirms the subscription asynchronously, as the
// channel's :postgres_subscribe does once the subscription rows exist; a
// malformed filter gets the system error instead, and no retry.
func (p *Phoenix) subscribeLater(c *phxConn) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		time.Sleep(5 * time.Millisecond)
		p.mu.Lock()
		topic, jr, subsErr := c.topic, c.joinRef, c.subsErr
		ok := topic != "" && p.conns[c]
		if ok && subsErr == "" {
			c.subscribed = true
		}
		p.mu.Unlock()
		if !ok {
			return
		}
		status, msg := "ok", "Subscribed to PostgreSQL"
		if subsErr != "" {
			status, msg = "error", subsErr
		}
		c.send(topic, "system", map[string]any{"extension": "postgres_changes", "status": status,
			"message": msg, "channel": strings.TrimPrefix(topic, "realtime:")}, "", jr)
	}()
}

// accessToken handles a pushed token as handle_in("access_token") does: a
// key (sb_…) or the same token is ignored; an invalid or expired one shuts
// the channel; a new valid one replaces the claims and re-subscribes.
func (p *Phoenix) accessToken(c *phxConn, m frame) {
	var pl struct {
		AccessToken *string `json:"access_token"`
	}
	json.Unmarshal(m.Payload, &pl)
	if pl.AccessToken == nil {
		return
	}
	tok := *pl.AccessToken
	p.mu.Lock()
	p.tokens = append(p.tokens, tok)
	same := tok == c.token
	p.mu.Unlock()
	if strings.HasPrefix(tok, "sb_") || same {
		return
	}
	claims, role, err := p.verify(tok)
	if err != nil {
		// handle_in("access_token")'s else clauses: the message without
		// its code; errors it has no clause for are inspected atoms.
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, "JwtSignatureError:"):
			msg = ":signature_error"
		case strings.HasPrefix(msg, "JwtSignerError:"):
			msg = ":error_generating_signer"
		default:
			_, msg, _ = strings.Cut(msg, ": ")
		}
		p.shutdown(c, msg)
		return
	}
	p.mu.Lock()
	c.token, c.role, c.claims, c.subscribed = tok, role, claims, false
	c.exp, _, _ = signing.Exp(claims)
	n := len(c.subs)
	p.mu.Unlock()
	if n > 0 {
		p.subscribeLater(c)
	}
}

func (c *phxConn) send(topic, event string, payload any, ref, joinRef string) {
	nul := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var b []byte
	if c.v2 {
		b, _ = json.Marshal([]any{nul(joinRef), nul(ref), topic, event, payload})
	} else {
		b, _ = json.Marshal(map[string]any{"topic": topic, "event": event, "payload": payload, "ref": nul(ref)})
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteMessage(websocket.TextMessage, b)
}

// confirmTokens shuts the channel down when its token expires, as the
// channel's :confirm_token timer does (realtime_channel.ex: confirm_token
// runs again after min(5 minutes, exp - now), and an expired token ends in
// shutdown_response "Token has expired N seconds ago"). A server on an sb_
// key joins with the gateway's short-lived JWT, so this is what it sees
// when that JWT's life ends.
func (p *Phoenix) confirmTokens(c *phxConn, done <-chan struct{}) {
	defer p.wg.Done()
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
		}
		now := time.Now().Unix()
		p.mu.Lock()
		exp, joined := c.exp, c.topic != ""
		if joined && exp != 0 && exp <= now {
			c.exp = 0
		}
		p.mu.Unlock()
		if joined && exp != 0 && exp <= now {
			p.shutdown(c, fmt.Sprintf("Token has expired %d seconds ago", now-exp))
		}
	}
}

// shutdown ends a channel as shutdown_response does: a system error, then
// the channel process stops normally and Phoenix sends phx_close.
func (p *Phoenix) shutdown(c *phxConn, message string) {
	p.mu.Lock()
	c.subscribed = false
	topic, ref := c.topic, c.joinRef
	c.topic, c.subs = "", nil
	p.mu.Unlock()
	c.send(topic, "system", map[string]any{"extension": "system", "status": "error", "message": message,
		"channel": strings.TrimPrefix(topic, "realtime:")}, "", ref)
	c.send(topic, "phx_close", map[string]any{}, ref, ref)
}

// ShutdownAll shuts down every joined channel with message.
func (p *Phoenix) ShutdownAll(message string) {
	for _, c := range p.snapshot() {
		p.mu.Lock()
		joined := c.topic != ""
		p.mu.Unlock()
		if joined {
			p.shutdown(c, message)
		}
	}
}

// ResendSubscribed sends "Subscribed to PostgreSQL" again on every
// subscribed channel, as Realtime does after its change capture restarts
// or a new access token; what changed before it may never have been sent.
func (p *Phoenix) ResendSubscribed() int {
	n := 0
	for _, c := range p.snapshot() {
		p.mu.Lock()
		topic, jr, ok := c.topic, c.joinRef, c.subscribed
		p.mu.Unlock()
		if ok {
			n++
			c.send(topic, "system", map[string]any{"extension": "postgres_changes", "status": "ok",
				"message": "Subscribed to PostgreSQL", "channel": strings.TrimPrefix(topic, "realtime:")}, "", jr)
		}
	}
	return n
}

// LoseChanges makes the stand-in read and discard every change while on,
// as when its change capture is down and the slot is recreated.
func (p *Phoenix) LoseChanges(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = on
}

// DropChanges silently discards the next n changes (0: none), as
// Realtime does with the events of a tenant over its rate limit.
func (p *Phoenix) DropChanges(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropNext = n
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

// Close drops every connection, stops the poller and waits for both.
func (p *Phoenix) Close() {
	select {
	case <-p.stop:
		return
	default:
		close(p.stop)
	}
	p.Drop()
	p.wg.Wait()
	if p.pool != nil {
		p.pool.Close()
	}
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

// SilentHeartbeats stops (or resumes) answering heartbeats. Turning it on
// clears FirstUnanswered.
func (p *Phoenix) SilentHeartbeats(on bool) {
	if on {
		p.firstUnanswered.Store(0)
	}
	p.silentHeartbeats.Store(on)
}

// FirstUnanswered returns when the first heartbeat was left unanswered
// since SilentHeartbeats(true); the zero time if none was.
func (p *Phoenix) FirstUnanswered() time.Time {
	if ns := p.firstUnanswered.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Joins returns how many joins the stand-in has received.
func (p *Phoenix) Joins() int { return int(p.joins.Load()) }

// Polls returns how many times the slot has been read.
func (p *Phoenix) Polls() int64 { return p.polls.Load() }

// Delivered returns how many postgres_changes messages were sent.
func (p *Phoenix) Delivered() int64 { return p.delivered.Load() }

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

// w2jChange is one row of wal2json's format-version 2.
type w2jChange struct {
	Action    string      `json:"action"`
	Timestamp string      `json:"timestamp"`
	Schema    string      `json:"schema"`
	Table     string      `json:"table"`
	Columns   []w2jColumn `json:"columns"`
	Identity  []w2jColumn `json:"identity"`
	PK        []w2jColumn `json:"pk"`
}

type w2jColumn struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	TypeOID uint32          `json:"typeoid"`
	Value   json.RawMessage `json:"value"`
}

// text is the column's value as realtime.cast gets it: (value #>> '{}').
func (c w2jColumn) text() *string {
	if len(c.Value) == 0 || string(c.Value) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(c.Value, &s) == nil {
		return &s
	}
	s = string(c.Value)
	return &s
}

// poll reads the slot until Close, as ReplicationPoller does.
func (p *Phoenix) poll(conn *pgx.Conn, slot string) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	defer conn.Close(context.WithoutCancel(ctx))
	wait := time.Duration(0)
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(wait):
		}
		var ok bool
		if wait, ok = p.pollOnce(ctx, conn, slot); !ok {
			return
		}
	}
}

// pollOnce reads the slot's next changes and dispatches them, and returns
// the wait until the next poll as ReplicationPoller chooses it; false when
// polling is to stop (an error, reported unless ctx ended).
func (p *Phoenix) pollOnce(ctx context.Context, conn *pgx.Conn, slot string) (wait time.Duration, ok bool) {
	var actions, tables string
	// list_changes: the publication decides the tables and actions.
	err := conn.QueryRow(ctx, `
			select concat_ws(',', case when bool_or(pubinsert) then 'insert' end,
			                      case when bool_or(pubupdate) then 'update' end,
			                      case when bool_or(pubdelete) then 'delete' end),
			       coalesce(string_agg(format('%s.%s', quote_ident(schemaname), quote_ident(tablename)), ','), '')
			from pg_publication pp left join pg_publication_tables ppt on pp.pubname = ppt.pubname
			where pp.pubname = 'supabase_realtime'`).Scan(&actions, &tables)
	if err != nil {
		if ctx.Err() == nil {
			p.t.Errorf("realtime stand-in: read publication: %v", err)
		}
		return 0, false
	}
	if tables == "" {
		return 5 * p.PollInterval, true
	}
	p.polls.Add(1)
	changes, err := p.readSlot(ctx, conn, slot, actions, tables)
	if err != nil {
		if ctx.Err() == nil {
			p.t.Errorf("realtime stand-in: read slot: %v", err)
		}
		return 0, false
	}
	processed := 0
	for _, ch := range changes {
		n, err := p.dispatch(ctx, ch)
		if err != nil {
			if ctx.Err() == nil {
				p.t.Errorf("realtime stand-in: %s.%s: %v", ch.Schema, ch.Table, err)
			}
			return 0, false
		}
		processed += n
	}
	switch {
	case processed > 0:
		return 0, true
	case len(changes) > 0:
		return p.PollInterval + time.Duration(50+rand.IntN(51))*time.Millisecond, true
	default:
		return 5 * p.PollInterval, true // @idle_multiplier
	}
}

// readSlot takes up to poll_max_changes changes of tables and actions
// from the slot (pg_logical_slot_get_changes with wal2json format 2). A
// row wal2json wrote that cannot be decoded fails the test and is skipped.
func (p *Phoenix) readSlot(ctx context.Context, conn *pgx.Conn, slot, actions, tables string) ([]w2jChange, error) {
	const maxChanges = 100 // poll_max_changes
	rows, err := conn.Query(ctx, `select data from pg_logical_slot_get_changes($1, null, $2,
			'include-pk', 'true', 'include-transaction', 'false', 'include-timestamp', 'true',
			'include-type-oids', 'true', 'format-version', '2', 'actions', $3, 'add-tables', $4)`,
		slot, maxChanges, actions, tables)
	if err != nil {
		return nil, err
	}
	var changes []w2jChange
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			break
		}
		var ch w2jChange
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			p.t.Errorf("realtime stand-in: wal2json row %q: %v", data, err)
			continue
		}
		changes = append(changes, ch)
	}
	rows.Close()
	return changes, rows.Err()
}

type target struct {
	c      *phxConn
	topic  string
	jr     string
	role   string
	claims map[string]any
	ids    []int64
	subs   []phxSub
}

// dispatch does for one change what apply_rls and the MessageDispatcher do,
// and returns how many messages it sent.
func (p *Phoenix) dispatch(ctx context.Context, ch w2jChange) (int, error) {
	action := map[string]string{"I": "INSERT", "U": "UPDATE", "D": "DELETE"}[ch.Action]
	if action == "" {
		return 0, nil
	}
	targets := p.targets(ch, action)
	if len(targets) == 0 {
		return 0, nil
	}
	rc, err := p.cast(ctx, ch, action)
	if err != nil {
		return 0, err
	}
	sent := 0
	byRole := map[string][]*target{}
	for _, tg := range targets {
		byRole[tg.role] = append(byRole[tg.role], tg)
	}
	roles := make([]string, 0, len(byRole))
	for r := range byRole {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, role := range roles {
		data, errored, err := p.roleData(ctx, rc, role)
		if err != nil {
			return sent, err
		}
		n, err := p.sendTo(ctx, rc, role, data, errored, byRole[role])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// targets returns the subscribed connections with subscriptions matching
// ch's table and action, each with those subscriptions; none while
// LoseChanges is on or DropChanges has changes left to drop.
func (p *Phoenix) targets(ch w2jChange, action string) []*target {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lose || p.dropNext > 0 {
		if !p.lose {
			p.dropNext--
		}
		return nil
	}
	var targets []*target
	for c := range p.conns {
		if !c.subscribed {
			continue
		}
		tg := &target{c: c, topic: c.topic, jr: c.joinRef, role: c.role, claims: c.claims}
		for _, s := range c.subs {
			if s.schema == ch.Schema && s.table == ch.Table && (s.event == "*" || s.event == action) {
				tg.subs = append(tg.subs, s)
			}
		}
		if len(tg.subs) > 0 {
			targets = append(targets, tg)
		}
	}
	return targets
}

// castChange is a change being dispatched: the wal2json row, its action,
// its table (entity, whether it has row-level security, its primary key)
// and its record and old record cast to JSON.
type castChange struct {
	ch       w2jChange
	action   string
	entity   string
	rls      bool
	isPK     map[string]bool
	rec, old map[string]json.RawMessage
}

// cast reads ch's table's row-level security and casts its values.
func (p *Phoenix) cast(ctx context.Context, ch w2jChange, action string) (*castChange, error) {
	rc := &castChange{ch: ch, action: action, entity: pgx.Identifier{ch.Schema, ch.Table}.Sanitize(), isPK: map[string]bool{}}
	if err := p.pool.QueryRow(ctx, `select relrowsecurity from pg_class where oid = $1::regclass`, rc.entity).Scan(&rc.rls); err != nil {
		return nil, err
	}
	for _, c := range ch.PK {
		rc.isPK[c.Name] = true
	}
	var err error
	if rc.rec, err = p.typed(ctx, ch.Columns); err != nil {
		return nil, err
	}
	if rc.old, err = p.typed(ctx, ch.Identity); err != nil {
		return nil, err
	}
	return rc, nil
}

// typed returns the columns' values as JSON of their column types
// (realtime.cast).
func (p *Phoenix) typed(ctx context.Context, cols []w2jColumn) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, c := range cols {
		var v json.RawMessage
		if err := p.pool.QueryRow(ctx, `select realtime.standin_cast($1, $2::oid::regtype)`, c.text(), c.TypeOID).Scan(&v); err != nil {
			return nil, err
		}
		out[c.Name] = v
	}
	return out, nil
}

// roleData is the change's data as role sees it: only the columns it may
// select, or errors (no primary key, or one role may not select) in place
// of the record; errored reports the latter.
func (p *Phoenix) roleData(ctx context.Context, rc *castChange, role string) (data map[string]any, errored bool, err error) {
	ch, action := rc.ch, rc.action
	// has_column_privilege per column, once per role.
	selectable := map[string]bool{}
	var colsJSON json.RawMessage
	err = p.pool.QueryRow(ctx, `
			select coalesce(jsonb_agg(jsonb_build_object('name', a.attname, 'type', t.typname) order by a.attnum), '[]')
			from pg_attribute a join pg_type t on t.oid = a.atttypid
			where a.attrelid = $2::regclass and a.attnum > 0 and not a.attisdropped
			  and has_column_privilege($1, $2::regclass, a.attname, 'SELECT')`, role, rc.entity).Scan(&colsJSON)
	if err != nil {
		return nil, false, err
	}
	var cols []struct{ Name string }
	json.Unmarshal(colsJSON, &cols)
	for _, c := range cols {
		selectable[c.Name] = true
	}
	errs := any(nil)
	pkOK := len(ch.PK) > 0
	for _, c := range ch.PK {
		pkOK = pkOK && selectable[c.Name]
	}
	data = map[string]any{"schema": ch.Schema, "table": ch.Table, "type": action}
	if action != "DELETE" && len(ch.PK) == 0 {
		errs = []string{"Error 400: Bad Request, no primary key"}
	} else if action != "DELETE" && !pkOK {
		errs = []string{"Error 401: Unauthorized"}
	} else {
		ts, _ := time.Parse("2006-01-02 15:04:05.999999-07", ch.Timestamp)
		data["commit_timestamp"] = ts.UTC().Format("2006-01-02T15:04:05.000Z")
		data["columns"] = colsJSON
		pick := func(m map[string]json.RawMessage, pkOnly bool) map[string]json.RawMessage {
			out := map[string]json.RawMessage{}
			for k, v := range m {
				if selectable[k] && (!pkOnly || rc.isPK[k]) {
					out[k] = v
				}
			}
			return out
		}
		switch action {
		case "INSERT", "UPDATE":
			data["record"] = pick(rc.rec, false)
			if action == "UPDATE" {
				data["old_record"] = pick(rc.old, false)
			}
		case "DELETE":
			data["old_record"] = pick(rc.old, rc.rls) // with RLS, deletes carry the key only
		}
	}
	data["errors"] = errs
	return data, errs != nil, nil
}

// sendTo sends data to each of role's targets whose subscriptions the
// change is visible to, with the ids of those subscriptions, and returns
// how many it sent.
func (p *Phoenix) sendTo(ctx context.Context, rc *castChange, role string, data map[string]any, errored bool, targets []*target) (int, error) {
	sent := 0
	for _, tg := range targets {
		for _, s := range tg.subs {
			ok, err := p.visible(ctx, rc.ch, rc.action, rc.rls, role, tg.claims, s, errored)
			if err != nil {
				return sent, err
			}
			if ok {
				tg.ids = append(tg.ids, s.id)
			}
		}
		if len(tg.ids) == 0 {
			continue
		}
		tg.c.send(tg.topic, "postgres_changes", map[string]any{"ids": tg.ids, "data": data}, "", tg.jr)
		p.delivered.Add(1)
		sent++
	}
	return sent, nil
}

// visible applies a subscription's filters and, for a table with row-level
// security, checks that its role and claims can select the row by its
// primary key (build_prepared_statement_sql, run under set_config('role')
// and set_config('request.jwt.claims') as apply_rls does). Deletes pass the
// RLS check, as in apply_rls.
func (p *Phoenix) visible(ctx context.Context, ch w2jChange, action string, rls bool, role string, claims map[string]any, s phxSub, errored bool) (bool, error) {
	cols := ch.Columns
	if action == "DELETE" {
		cols = ch.Identity
	}
	byName := map[string]w2jColumn{}
	for _, c := range cols {
		byName[c.Name] = c
	}
	for _, f := range s.filter {
		c, ok := byName[f.col]
		if !ok {
			return false, nil
		}
		var pass bool
		if err := p.pool.QueryRow(ctx, `select realtime.standin_check($1, $2::oid::regtype, $3, $4)`, f.op, c.TypeOID, c.text(), f.val).Scan(&pass); err != nil {
			return false, err
		}
		if pass == f.negate {
			return false, nil
		}
	}
	if errored || !rls || action == "DELETE" {
		return true, nil
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	cj, _ := json.Marshal(claims)
	if _, err := tx.Exec(ctx, `select set_config('role', $1, true), set_config('request.jwt.claims', $2, true)`, role, string(cj)); err != nil {
		return false, err
	}
	// quote_ident(name) = quote_nullable(value), as the prepared statement
	// is built: an untyped literal takes the column's type.
	var where []string
	for _, pk := range ch.PK {
		lit := "null"
		if v := byName[pk.Name].text(); v != nil {
			lit = "'" + strings.ReplaceAll(*v, "'", "''") + "'"
		}
		where = append(where, pgx.Identifier{pk.Name}.Sanitize()+" = "+lit)
	}
	var ok bool
	err = tx.QueryRow(ctx, fmt.Sprintf("select exists(select 1 from %s where %s)", pgx.Identifier{ch.Schema, ch.Table}.Sanitize(), strings.Join(where, " and "))).Scan(&ok)
	if err != nil {
		// A role that may not select the table sees nothing.
		return false, nil
	}
	return ok, nil
}

func pgxConnect(url string) (*pgx.Conn, error) { return pgx.Connect(context.Background(), url) }
