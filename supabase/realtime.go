package supabase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/internal/reconnect"
	"github.com/office-server/office-server/office"
)

// CatchUp is what the feed reads after every (re)subscribe: the rows still
// awaiting the office. *Store implements it.
type CatchUp interface {
	ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error)
	ListPendingUserMessages(ctx context.Context, d office.Due) ([]office.UserMessage, error)
	ListUndeliveredDependencies(ctx context.Context, d office.Due) ([]office.DependencyRequest, error)
}

// RealtimeOptions configures a Realtime feed. Zero values take the defaults.
type RealtimeOptions struct {
	// AccessToken returns the JWT the channel joins with. It is called
	// before every join and every TokenRefresh; a changed token is pushed
	// to the channel (event access_token). Nil: the API key is the token
	// (right for a server's key: the legacy service-role key does not
	// expire, and for an sb_ key Realtime uses the socket's gateway token,
	// renewed by reconnecting when it expires).
	AccessToken func(ctx context.Context) (string, error)
	// TokenRefresh is how often AccessToken is asked again while joined;
	// default 5 minutes.
	TokenRefresh time.Duration
	// Heartbeat is the interval of Phoenix heartbeats on topic "phoenix";
	// a heartbeat still unanswered when the next is due drops the
	// connection. Default 25 s (Realtime times a socket out after 60 s).
	Heartbeat time.Duration
	// JoinTimeout bounds the wait for the join reply and then for the
	// "Subscribed to PostgreSQL" system message. Default 10 s.
	JoinTimeout time.Duration
	// Reconnected, when set, is called each time the connection was lost
	// and is about to be made again (a metric).
	Reconnected func()
	// MinBackoff and MaxBackoff bound the step of the jittered, doubling
	// wait between reconnects (reconnect.Backoff: ±50 % of the step).
	// Defaults 500 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// RateLimitBackoff is the least wait after Realtime refused for a rate
	// limit (…RateLimitReached, "Too many …"). Default 15 s.
	RateLimitBackoff time.Duration
	// CatchUpEvery is how often the feed reads the rows still awaiting the
	// office while live, the safety net for changes Realtime drops without
	// a word (a tenant over its rate limit). Each costs three REST reads
	// (questions, messages, dependencies, for all offices at once).
	// Default 1 minute; negative disables it.
	CatchUpEvery time.Duration
	// Topic is the channel name (topic "realtime:<Topic>"); default
	// "office-server".
	Topic string
	// Schema of the watched tables; default "public".
	Schema string
	// Dialer dials the WebSocket; default websocket.DefaultDialer.
	Dialer *websocket.Dialer
	Logger *slog.Logger
}

// Realtime is office.ChangeFeed over Supabase Realtime's postgres_changes:
// a Phoenix channel (serializer 1.0.0, JSON) on one WebSocket, written by
// one goroutine. Realtime does not replay what happened while the socket was
// down, so after every subscribe the feed reads the rows still awaiting the
// office from CatchUp and reports them (Op CATCHUP) before live changes.
type Realtime struct {
	wsURL  string
	apiKey string
	src    CatchUp
	o      RealtimeOptions
	log    *slog.Logger

	connected atomic.Bool
	mu        sync.Mutex
	lastErr   error
}

// NewRealtime returns a feed for the Supabase project at projectURL
// (https://<ref>.supabase.co), authenticated with apiKey (on a server the
// secret key sb_secret_…, or the legacy service-role JWT) in the socket
// URL, reading catch-ups from src. Without AccessToken the channel joins
// with apiKey as its access_token, which Realtime takes for the socket's
// own token. It does no I/O; Watch connects.
func NewRealtime(projectURL, apiKey string, src CatchUp, o RealtimeOptions) (*Realtime, error) {
	if apiKey == "" || src == nil {
		return nil, office.Errorf(office.EINVALID, "realtime: API key and catch-up source are required")
	}
	u, err := url.Parse(strings.TrimRight(projectURL, "/"))
	if err != nil || u.Host == "" {
		return nil, office.Errorf(office.EINVALID, "realtime: bad project URL %q", projectURL)
	}
	switch u.Scheme {
	case "https", "wss":
		u.Scheme = "wss"
	case "http", "ws":
		u.Scheme = "ws"
	default:
		return nil, office.Errorf(office.EINVALID, "realtime: bad project URL scheme %q", u.Scheme)
	}
	u.Path += "/realtime/v1/websocket"
	u.RawQuery = url.Values{"apikey": {apiKey}, "vsn": {"1.0.0"}}.Encode()
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TokenRefresh, 5*time.Minute)
	def(&o.Heartbeat, 25*time.Second)
	def(&o.JoinTimeout, 10*time.Second)
	def(&o.MinBackoff, 500*time.Millisecond)
	def(&o.MaxBackoff, 30*time.Second)
	def(&o.RateLimitBackoff, 15*time.Second)
	if o.CatchUpEvery == 0 {
		o.CatchUpEvery = time.Minute
	}
	if o.Topic == "" {
		o.Topic = "office-server"
	}
	if o.Schema == "" {
		o.Schema = "public"
	}
	if o.Dialer == nil {
		o.Dialer = websocket.DefaultDialer
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Realtime{wsURL: u.String(), apiKey: apiKey, src: src, o: o, log: log.With("component", "realtime")}, nil
}

var _ office.ChangeFeed = (*Realtime)(nil)

// Connected reports whether the channel is joined, subscribed to
// PostgreSQL and caught up.
func (r *Realtime) Connected() bool { return r.connected.Load() }

// Err returns why the last connection ended (nil if none has).
func (r *Realtime) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// binding is one postgres_changes subscription of the join.
type binding struct {
	Event  string `json:"event"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Filter string `json:"filter,omitempty"`
}

func (r *Realtime) bindings(officeIDs []string) ([]binding, error) {
	filter := ""
	if len(officeIDs) > 0 {
		for _, id := range officeIDs {
			// Realtime's in filter is a plain comma list; ids with , ( ) or
			// quotes cannot be expressed in it.
			if id == "" || strings.ContainsAny(id, `,()" `) {
				return nil, office.Errorf(office.EINVALID, "realtime: office id %q cannot be filtered on", id)
			}
		}
		filter = "office_id=in.(" + strings.Join(officeIDs, ",") + ")"
	}
	return []binding{
		{Event: office.OpUpdate, Schema: r.o.Schema, Table: office.TableQuestions, Filter: filter},
		{Event: office.OpInsert, Schema: r.o.Schema, Table: office.TableMessages, Filter: filter},
		{Event: office.OpUpdate, Schema: r.o.Schema, Table: office.TableDependencies, Filter: filter},
		// New pending rows, for their deadlines (office.Change.ExpiresAt):
		// the engine expires them without polling.
		{Event: office.OpInsert, Schema: r.o.Schema, Table: office.TableQuestions, Filter: filter},
		{Event: office.OpInsert, Schema: r.o.Schema, Table: office.TableDependencies, Filter: filter},
	}, nil
}

// Watch joins the channel and calls fn for each change until ctx ends
// (then it returns nil), reconnecting with jittered backoff. fn is called
// from this goroutine only. It returns an EINVALID error at once for an
// office id the Realtime filter cannot express. One Realtime serves one
// Watch at a time.
func (r *Realtime) Watch(ctx context.Context, officeIDs []string, fn func(office.Change)) error {
	bs, err := r.bindings(officeIDs)
	if err != nil {
		return err
	}
	backoff := reconnect.Backoff(r.o.MinBackoff, r.o.MaxBackoff)
	for {
		subscribed, err := r.session(ctx, bs, officeIDs, fn)
		r.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		if subscribed {
			backoff.Reset()
		}
		wait := backoff.NextBackOff()
		if isRateLimit(err) && wait < r.o.RateLimitBackoff {
			wait = r.o.RateLimitBackoff + rand.N(r.o.RateLimitBackoff/4+1)
		}
		if subscribed && r.gatewayTokenExpired(err) {
			// Routine on an sb_ key: a new socket gets a new token.
			r.log.Info("realtime: the socket's gateway token expired; reconnecting")
			wait = 0
		} else {
			r.log.Warn("realtime disconnected; reconnecting", "err", err, "wait", wait)
		}
		if r.o.Reconnected != nil {
			r.o.Reconnected()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// ServerError is an error Realtime reported: a join refused (phx_reply
// status error, Reason), a channel shut down (system message with status
// error), or the channel closed or crashed (phx_close, phx_error).
type ServerError struct {
	Event  string // phx_reply, system, phx_close, phx_error
	Reason string
}

func (e *ServerError) Error() string {
	if e.Reason == "" {
		return "realtime: " + e.Event
	}
	return "realtime: " + e.Event + ": " + e.Reason
}

// isRateLimit reports whether Realtime refused for a rate limit: join
// replies "ClientJoinRateLimitReached: …", "ChannelRateLimitReached: …",
// "ConnectionRateLimitReached: …", and channel shutdowns "Too many messages
// per second" and the like (supabase/realtime realtime_channel.ex).
func isRateLimit(err error) bool {
	var se *ServerError
	if !errors.As(err, &se) {
		return false
	}
	return strings.Contains(se.Reason, "RateLimitReached") || strings.Contains(se.Reason, "Too many")
}

// gatewayTokenExpired reports whether err is Realtime shutting the channel
// because the socket's own token expired. With an sb_ key in the URL that
// token is the short-lived role JWT Supabase's gateway made of the key
// (Realtime reads it from x-api-key: user_socket.ex access_token/2), and a
// join with the key as access_token uses it (realtime_channel.ex
// assign_access_token: "sb_" → tenant_token); the channel's confirm_token
// timer then ends it with "Token has expired N seconds ago". Only a new
// socket gets a new token, so the feed reconnects at once.
func (r *Realtime) gatewayTokenExpired(err error) bool {
	var se *ServerError
	return r.o.AccessToken == nil && isAPIKey(r.apiKey) && errors.As(err, &se) && strings.Contains(se.Reason, "Token has expired")
}

// isTokenError reports whether Realtime refused the access token.
func isTokenError(err error) bool {
	var se *ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, s := range []string{"Token has expired", "InvalidJWTToken", "JwtSignatureError", "MalformedJWT", "not a valid JWT", "`role` and `exp`"} {
		if strings.Contains(se.Reason, s) {
			return true
		}
	}
	return false
}

// message is a Phoenix message (serializer 1.0.0: a JSON object).
type message struct {
	Topic   string          `json:"topic"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Ref     *string         `json:"ref"`
}

func (m message) ref() string {
	if m.Ref == nil {
		return ""
	}
	return *m.Ref
}

type reply struct {
	Status   string `json:"status"`
	Response struct {
		PostgresChanges []struct {
			ID int64 `json:"id"`
			binding
		} `json:"postgres_changes"`
		Reason string `json:"reason"`
	} `json:"response"`
}

type systemPayload struct {
	Extension string `json:"extension"`
	Status    string `json:"status"`
	Message   string `json:"message"`
	Channel   string `json:"channel"`
}

// changePayload is a postgres_changes push: data as the replication
// poller builds it, ids the subscriptions it matched.
type changePayload struct {
	IDs  []int64 `json:"ids"`
	Data struct {
		Schema          string         `json:"schema"`
		Table           string         `json:"table"`
		CommitTimestamp string         `json:"commit_timestamp"`
		Type            string         `json:"type"`
		EventType       string         `json:"eventType"`
		Record          map[string]any `json:"record"`
		OldRecord       map[string]any `json:"old_record"`
		Columns         []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"columns"`
		Errors any `json:"errors"`
	} `json:"data"`
}

type conn struct {
	ws         *websocket.Conn
	out        chan []byte
	in         chan message
	readErr    chan error
	writerDone chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup
	ref        int
	// hbAck is the ref of the newest heartbeat reply, recorded by the
	// reader: the socket's liveness must not depend on how fast the main
	// loop gets through fn calls and queued frames.
	hbAck atomic.Int64
	// lost is set (under Realtime.mu) when the reader fails.
	lost bool
}

const writeTimeout = 10 * time.Second

func (r *Realtime) dial(ctx context.Context) (*conn, error) {
	ws, resp, err := r.o.Dialer.DialContext(ctx, r.wsURL, http.Header{"User-Agent": {userAgent}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial realtime: %s: %w", resp.Status, err)
		}
		return nil, fmt.Errorf("dial realtime: %w", err)
	}
	c := &conn{ws: ws, out: make(chan []byte, 16), in: make(chan message, 256), readErr: make(chan error, 1),
		writerDone: make(chan struct{}), done: make(chan struct{})}
	readTimeout := 2*r.o.Heartbeat + 5*time.Second
	c.wg.Add(2)
	go func() { // the only reader
		defer c.wg.Done()
		for {
			ws.SetReadDeadline(time.Now().Add(readTimeout))
			_, data, err := ws.ReadMessage()
			if err != nil {
				// The feed stops being trusted now, not when the main loop
				// (perhaps busy in fn with frames queued before the loss)
				// gets to the error.
				r.mu.Lock()
				c.lost = true
				r.connected.Store(false)
				r.mu.Unlock()
				c.readErr <- err
				return
			}
			var m message
			if err := json.Unmarshal(data, &m); err != nil {
				r.log.Warn("realtime: undecodable frame", "err", err, "len", len(data))
				continue
			}
			if m.Topic == "phoenix" {
				// Heartbeat replies are the only messages on this topic.
				if n, err := strconv.ParseInt(m.ref(), 10, 64); err == nil && m.Event == "phx_reply" && n > c.hbAck.Load() {
					c.hbAck.Store(n)
				}
				continue
			}
			select {
			case c.in <- m:
			case <-c.done:
				return
			}
		}
	}()
	go func() { // the only writer
		defer c.wg.Done()
		defer close(c.writerDone)
		for {
			select {
			case b := <-c.out:
				ws.SetWriteDeadline(time.Now().Add(writeTimeout))
				if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
					ws.Close()
					return
				}
			case <-c.done:
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
		}
	}()
	return c, nil
}

// close ends the connection: the writer sends a close frame and stops,
// then closing the socket ends the reader.
func (c *conn) close() {
	close(c.done)
	<-c.writerDone
	c.ws.Close()
	c.wg.Wait()
}

var errWriterGone = errors.New("realtime: connection lost while writing")

// send queues a message for the writer and returns its ref.
func (c *conn) send(ctx context.Context, topic, event string, payload any) (string, error) {
	c.ref++
	ref := strconv.Itoa(c.ref)
	b, err := json.Marshal(map[string]any{"topic": topic, "event": event, "payload": payload, "ref": ref})
	if err != nil {
		return "", err
	}
	select {
	case c.out <- b:
		return ref, nil
	case <-c.writerDone:
		return "", errWriterGone
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (r *Realtime) token(ctx context.Context) (string, error) {
	if r.o.AccessToken == nil {
		return r.apiKey, nil
	}
	t, err := r.o.AccessToken(ctx)
	if err != nil {
		return "", fmt.Errorf("realtime access token: %w", err)
	}
	return t, nil
}

// session runs one connection: join, wait for the subscription, catch up,
// then deliver live changes until the connection or channel ends.
// subscribed reports whether it got as far as delivering live changes.
func (r *Realtime) session(ctx context.Context, want []binding, officeIDs []string, fn func(office.Change)) (subscribed bool, err error) {
	token, err := r.token(ctx)
	if err != nil {
		return false, err
	}
	c, err := r.dial(ctx)
	if err != nil {
		return false, err
	}
	defer c.close()
	ch := &channel{r: r, c: c, topic: "realtime:" + r.o.Topic, want: want, officeIDs: officeIDs, fn: fn, token: token}
	err = ch.run(ctx)
	return ch.subscribed, err
}

// phase is how far a channel has got: joining (phx_join sent, no reply
// yet), subscribing (joined, awaiting "Subscribed to PostgreSQL"), live
// (subscribed and caught up).
type phase int

const (
	joining phase = iota
	subscribing
	live
)

// channel is the state of one connection's Phoenix channel, driven by
// run's loop: each event (a frame, a timer) is one method.
type channel struct {
	r         *Realtime
	c         *conn
	topic     string
	want      []binding
	officeIDs []string
	fn        func(office.Change)
	token     string // the access token the channel last sent

	joinRef    string
	phase      phase
	routes     map[int64]binding // subscription id → binding; nil until joined
	deadline   *time.Timer       // for the join reply, then for the subscription
	pendingHB  int64             // ref of the heartbeat awaiting its reply; 0: none
	subscribed bool              // got as far as delivering live changes
}

// run joins and then handles frames and timers until the connection or
// the channel ends or ctx does; it returns why.
func (ch *channel) run(ctx context.Context) error {
	o := &ch.r.o
	if err := ch.join(ctx); err != nil {
		return err
	}
	ch.deadline = time.NewTimer(o.JoinTimeout)
	defer ch.deadline.Stop()
	hb := time.NewTicker(o.Heartbeat)
	defer hb.Stop()
	refresh := time.NewTicker(o.TokenRefresh)
	defer refresh.Stop()
	var periodic <-chan time.Time
	if o.CatchUpEvery > 0 {
		tk := time.NewTicker(o.CatchUpEvery)
		defer tk.Stop()
		periodic = tk.C
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			ch.leave(ctx)
			return ctx.Err()
		case rerr := <-ch.c.readErr:
			return fmt.Errorf("realtime read: %w", rerr)
		case <-ch.c.writerDone:
			return errWriterGone
		case <-ch.deadline.C:
			return ch.timedOut()
		case <-hb.C:
			err = ch.heartbeat(ctx)
		case <-periodic:
			if ch.phase == live {
				err = ch.r.catchUp(ctx, ch.officeIDs, ch.fn)
			}
		case <-refresh.C:
			err = ch.refreshToken(ctx)
		case m := <-ch.c.in:
			err = ch.handle(ctx, m)
		}
		if err != nil {
			return err
		}
	}
}

// join sends phx_join with the wanted postgres_changes bindings.
func (ch *channel) join(ctx context.Context) error {
	ref, err := ch.c.send(ctx, ch.topic, "phx_join", map[string]any{
		"config": map[string]any{
			"broadcast":        map[string]any{"ack": false, "self": false},
			"presence":         map[string]any{"key": "", "enabled": false},
			"postgres_changes": ch.want,
			"private":          false,
		},
		"access_token": ch.token,
	})
	ch.joinRef = ref
	return err
}

// leave sends a courtesy phx_leave, bounded: the socket closes right after.
func (ch *channel) leave(ctx context.Context) {
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	ch.c.send(leaveCtx, ch.topic, "phx_leave", map[string]any{})
	cancel()
}

// timedOut is the error for a deadline passed in the current phase.
func (ch *channel) timedOut() error {
	if ch.phase == joining {
		return fmt.Errorf("realtime: no join reply within %s", ch.r.o.JoinTimeout)
	}
	return fmt.Errorf("realtime: not subscribed to PostgreSQL within %s", ch.r.o.JoinTimeout)
}

// heartbeat fails when the previous heartbeat is still unanswered, and
// otherwise sends the next.
func (ch *channel) heartbeat(ctx context.Context) error {
	if ch.pendingHB != 0 && ch.c.hbAck.Load() < ch.pendingHB {
		return fmt.Errorf("realtime: heartbeat %d unanswered after %s", ch.pendingHB, ch.r.o.Heartbeat)
	}
	ref, err := ch.c.send(ctx, "phoenix", "heartbeat", map[string]any{})
	if err != nil {
		return err
	}
	ch.pendingHB, _ = strconv.ParseInt(ref, 10, 64)
	return nil
}

// refreshToken asks for the access token again once joined and pushes it
// to the channel when it changed. A failed refresh is logged, not fatal:
// the current token may still be good.
func (ch *channel) refreshToken(ctx context.Context) error {
	if ch.r.o.AccessToken == nil || ch.phase == joining {
		return nil
	}
	t, err := ch.r.token(ctx)
	if err != nil {
		ch.r.log.Warn("realtime: token refresh failed", "err", err)
		return nil
	}
	if t == ch.token {
		return nil
	}
	ch.token = t
	_, err = ch.c.send(ctx, ch.topic, "access_token", map[string]any{"access_token": t})
	return err
}

// handle acts on one message from the server; frames of other topics are
// ignored. It returns an error when the channel ends.
func (ch *channel) handle(ctx context.Context, m message) error {
	if m.Topic != ch.topic {
		return nil
	}
	switch m.Event {
	case "phx_reply":
		if m.ref() != ch.joinRef || ch.phase != joining {
			return nil
		}
		return ch.joined(m.Payload)
	case "system":
		return ch.system(ctx, m.Payload)
	case "phx_error":
		return &ServerError{Event: "phx_error"}
	case "phx_close":
		return &ServerError{Event: "phx_close"}
	case "postgres_changes":
		if ch.routes != nil {
			ch.r.deliver(m.Payload, ch.routes, ch.fn)
		}
	}
	return nil
}

// joined takes the join reply: a refusal is a ServerError; an acceptance
// must confirm every wanted binding, whose subscription ids route the
// changes to come.
func (ch *channel) joined(payload json.RawMessage) error {
	var rep reply
	if err := json.Unmarshal(payload, &rep); err != nil {
		return fmt.Errorf("realtime: join reply: %w", err)
	}
	if rep.Status != "ok" {
		return &ServerError{Event: "phx_reply", Reason: rep.Response.Reason}
	}
	routes := map[int64]binding{}
	for _, w := range ch.want {
		found := false
		for _, got := range rep.Response.PostgresChanges {
			if got.binding == w {
				routes[got.ID] = w
				found = true
			}
		}
		if !found {
			return fmt.Errorf("realtime: join reply lacks the subscription %+v", w)
		}
	}
	ch.routes = routes
	ch.phase = subscribing
	ch.deadline.Reset(ch.r.o.JoinTimeout)
	return nil
}

// system takes a system message: the postgres_changes subscription made
// (catch up, go live), failed (not live until the next), or the channel
// shutting down (a ServerError).
func (ch *channel) system(ctx context.Context, payload json.RawMessage) error {
	r := ch.r
	var sp systemPayload
	if err := json.Unmarshal(payload, &sp); err != nil {
		return fmt.Errorf("realtime: system message: %w", err)
	}
	switch {
	case sp.Status == "ok" && sp.Extension == "postgres_changes" && ch.phase != joining:
		// Every "Subscribed to PostgreSQL" catches up, live or not:
		// Realtime sends it again after its change capture
		// restarted or a new token, and what changed before it may
		// never come.
		ch.deadline.Stop()
		if err := r.catchUp(ctx, ch.officeIDs, ch.fn); err != nil {
			return err
		}
		ch.phase, ch.subscribed = live, true
		r.mu.Lock()
		// Not on a socket already known lost: the Subscribed
		// frame may have been queued before the loss.
		r.connected.Store(!ch.c.lost)
		r.mu.Unlock()
		r.log.Info("realtime subscribed and caught up", "topic", ch.topic)
	case sp.Status != "ok" && sp.Extension == "postgres_changes":
		// Realtime retries the subscription itself; changes may be
		// lost until it succeeds, so the feed is not trusted until
		// the next "Subscribed to PostgreSQL", which catches up again.
		r.log.Warn("realtime: postgres_changes subscription failed", "message", sp.Message)
		if ch.phase == live {
			ch.phase = subscribing
			r.connected.Store(false)
			ch.deadline.Reset(r.o.JoinTimeout)
		}
	case sp.Status != "ok":
		// The channel is shutting down (expired token, rate limit…);
		// phx_close follows.
		return &ServerError{Event: "system", Reason: sp.Message}
	}
	return nil
}

// deliver decodes a postgres_changes payload and calls fn when it is a row
// the office must act on.
func (r *Realtime) deliver(payload json.RawMessage, routes map[int64]binding, fn func(office.Change)) {
	var p changePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		r.log.Warn("realtime: undecodable postgres_changes", "err", err)
		return
	}
	var b binding
	ok := false
	for _, id := range p.IDs {
		if b, ok = routes[id]; ok {
			break
		}
	}
	if !ok {
		return
	}
	if p.Data.Errors != nil {
		// e.g. a payload too large: the record may hold only some columns;
		// the office reads the row by id.
		r.log.Warn("realtime: change carries errors", "table", b.Table, "errors", p.Data.Errors)
	}
	op := p.Data.Type
	if op == "" {
		op = p.Data.EventType
	}
	if (p.Data.Table != "" && p.Data.Table != b.Table) || op != b.Event {
		return
	}
	rec := p.Data.Record
	s := func(k string) string { v, _ := rec[k].(string); return v }
	ch := office.Change{Table: b.Table, Op: op, ID: s("id"), OfficeID: s("office_id"), AgentID: s("agent_id"), Status: s("status")}
	if ch.ID == "" {
		return
	}
	if op == office.OpInsert && ch.Status == "pending" && (ch.Table == office.TableQuestions || ch.Table == office.TableDependencies) {
		ch.ExpiresAt = recordTime(rec["expires_at"])
		fn(ch)
		return
	}
	if !awaiting(ch, rec) {
		return
	}
	fn(ch)
}

// awaiting reports whether a changed row is one the office acts on: an
// answered question, a pending message, a provided, rejected or expired
// dependency not yet delivered. A Realtime filter holds one condition (the
// offices), so the status is checked here.
func awaiting(ch office.Change, rec map[string]any) bool {
	switch ch.Table {
	case office.TableQuestions:
		return ch.Status == office.QuestionAnswered
	case office.TableMessages:
		return ch.Status == office.MessagePending
	case office.TableDependencies:
		if v, present := rec["delivered_at"]; present && v != nil {
			return false
		}
		return ch.Status == office.DependencyProvided || ch.Status == office.DependencyRejected || ch.Status == office.DependencyExpired
	}
	return false
}

// catchUp reports every row still awaiting the office as Op CATCHUP.
func (r *Realtime) catchUp(ctx context.Context, officeIDs []string, fn func(office.Change)) error {
	qs, err := r.src.ListAnsweredUndelivered(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return fmt.Errorf("realtime catch-up questions: %w", err)
	}
	ms, err := r.src.ListPendingUserMessages(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return fmt.Errorf("realtime catch-up messages: %w", err)
	}
	ds, err := r.src.ListUndeliveredDependencies(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return fmt.Errorf("realtime catch-up dependencies: %w", err)
	}
	for _, q := range qs {
		fn(office.Change{Table: office.TableQuestions, Op: office.OpCatchUp, ID: q.ID, OfficeID: q.OfficeID, AgentID: q.AgentID, Status: q.Status})
	}
	for _, m := range ms {
		fn(office.Change{Table: office.TableMessages, Op: office.OpCatchUp, ID: m.ID, OfficeID: m.OfficeID, AgentID: m.AgentID, Status: m.Status})
	}
	for _, d := range ds {
		fn(office.Change{Table: office.TableDependencies, Op: office.OpCatchUp, ID: d.ID, OfficeID: d.OfficeID, AgentID: d.AgentID, Status: d.Status})
	}
	return nil
}

// recordTime decodes a timestamp of a change's record (RFC 3339, or
// PostgreSQL's text form as wal2json writes it); nil when it cannot.
func recordTime(v any) *time.Time {
	s, _ := v.(string)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02T15:04:05.999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t
		}
	}
	return nil
}
