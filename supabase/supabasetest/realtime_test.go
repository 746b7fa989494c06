package supabasetest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestRealtimeFilters joins the Realtime stand-in over a raw WebSocket,
// once with each serializer (vsn 1.0.0: JSON objects; 2.0.0: arrays), with
// one postgres_changes binding per filter operator of supabase/realtime's
// subscriptions.ex, and checks which inserted rows each one matches.
func TestRealtimeFilters(t *testing.T) {
	p := supabasetest.New(t)
	filters := map[string][]int64{ // filter on office_events → the ids it matches
		"kind=eq.alpha":                 {1001},
		"kind=neq.alpha":                {1002, 1003},
		"id=lt.1002":                    {1001},
		"id=lte.1002":                   {1001, 1002},
		"id=gt.1002":                    {1003},
		"id=gte.1002":                   {1002, 1003},
		"kind=in.(alpha,gamma)":         {1001, 1003},
		"kind=like.%eta":                {1002},
		"kind=ilike.b%":                 {1002},
		"dedupe_key=is.null":            {1002, 1003},
		"kind=match.^g":                 {1003},
		"kind=imatch.^B":                {1002},
		"dedupe_key=isdistinct.k":       {1002, 1003},
		"kind=not.eq.alpha":             {1002, 1003},
		"kind=neq.alpha,id=lt.1003":     {1002},
		"kind=not.in.(alpha,Beta,zeta)": {1003},
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var officeID string
	if err := conn.QueryRow(ctx, `insert into public.offices (name) values ('Filters') returning id::text`).Scan(&officeID); err != nil {
		t.Fatal(err)
	}
	socks := map[string]*rawSocket{}
	for _, vsn := range []string{"1.0.0", "2.0.0"} {
		socks[vsn] = joinFilters(t, p, vsn, officeID, filters)
	}
	if _, err := conn.Exec(ctx, `insert into public.office_events (id, office_id, kind, dedupe_key) values
		(1001, $1, 'alpha', 'k'), (1002, $1, 'Beta', null), (1003, $1, 'gamma', null)`, officeID); err != nil {
		t.Fatal(err)
	}
	for vsn, s := range socks {
		got := map[string][]int64{}
		for n := 0; n < 3; {
			m := s.read(t)
			if m.Event != "postgres_changes" {
				continue
			}
			n++
			var pl struct {
				IDs  []int64 `json:"ids"`
				Data struct {
					Type   string         `json:"type"`
					Record map[string]any `json:"record"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &pl); err != nil || pl.Data.Type != "INSERT" {
				t.Fatalf("vsn %s: push %s: %v", vsn, m.Payload, err)
			}
			id := int64(pl.Data.Record["id"].(float64))
			for _, sub := range pl.IDs {
				f := s.filterOf[sub]
				got[f] = append(got[f], id)
			}
		}
		for f, want := range filters {
			g := got[f]
			slices.Sort(g)
			if !slices.Equal(g, want) {
				t.Errorf("vsn %s: filter %s matched %v; want %v", vsn, f, g, want)
			}
		}
	}
}

type rawSocket struct {
	ws       *websocket.Conn
	v2       bool
	filterOf map[int64]string // subscription id → its filter, without the office condition
}

type rawMsg struct {
	Topic, Event string
	Payload      json.RawMessage
}

// joinFilters joins topic realtime:filters-<vsn> with one INSERT binding on
// office_events per filter (each also limited to the office) and waits for
// "Subscribed to PostgreSQL".
func joinFilters(t *testing.T, p *supabasetest.Project, vsn, officeID string, filters map[string][]int64) *rawSocket {
	t.Helper()
	u := strings.Replace(p.URL, "http", "ws", 1) + "/realtime/v1/websocket?" +
		url.Values{"apikey": {p.Key}, "vsn": {vsn}}.Encode()
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	s := &rawSocket{ws: ws, v2: vsn == "2.0.0", filterOf: map[int64]string{}}
	var bindings []map[string]any
	for f := range filters {
		bindings = append(bindings, map[string]any{"event": "INSERT", "schema": "public", "table": "office_events",
			"filter": f + ",office_id=eq." + officeID})
	}
	topic := "realtime:filters-" + vsn
	payload := map[string]any{"config": map[string]any{"postgres_changes": bindings}, "access_token": p.Key}
	var frame any = map[string]any{"topic": topic, "event": "phx_join", "payload": payload, "ref": "1", "join_ref": "1"}
	if s.v2 {
		frame = []any{"1", "1", topic, "phx_join", payload}
	}
	if err := ws.WriteJSON(frame); err != nil {
		t.Fatal(err)
	}
	for subscribed := false; !subscribed; {
		m := s.read(t)
		switch m.Event {
		case "phx_reply":
			var r struct {
				Status   string
				Response struct {
					PostgresChanges []struct {
						ID     int64
						Filter string
					} `json:"postgres_changes"`
				}
			}
			if err := json.Unmarshal(m.Payload, &r); err != nil || r.Status != "ok" || len(r.Response.PostgresChanges) != len(filters) {
				t.Fatalf("vsn %s: join reply %s: %v", vsn, m.Payload, err)
			}
			for _, pc := range r.Response.PostgresChanges {
				s.filterOf[pc.ID] = strings.TrimSuffix(pc.Filter, ",office_id=eq."+officeID)
			}
		case "system":
			if !strings.Contains(string(m.Payload), "Subscribed to PostgreSQL") {
				t.Fatalf("vsn %s: system %s", vsn, m.Payload)
			}
			subscribed = true
		}
	}
	return s
}

func (s *rawSocket) read(t *testing.T) rawMsg {
	t.Helper()
	s.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := s.ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !s.v2 {
		var m rawMsg
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("1.0.0 frame %s: %v", data, err)
		}
		return m
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(data, &arr); err != nil || len(arr) != 5 {
		t.Fatalf("2.0.0 frame %s: want [join_ref, ref, topic, event, payload] (%v)", data, err)
	}
	m := rawMsg{Payload: arr[4]}
	if err := json.Unmarshal(arr[2], &m.Topic); err != nil {
		t.Fatal(fmt.Errorf("topic of %s: %w", data, err))
	}
	if err := json.Unmarshal(arr[3], &m.Event); err != nil {
		t.Fatal(fmt.Errorf("event of %s: %w", data, err))
	}
	return m
}

func foreignKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRealtimeJoins: any valid project JWT joins (the service-role key, a
// member's access token) and is then "Subscribed to PostgreSQL"; a token
// without role or exp, an expired one, one signed with another secret, one
// that is not a JWT and a bare "realtime:" topic are refused with Realtime's reasons, each only
// after JoinErrorDelay (as join_error sleeps channel_error_backoff_ms); a
// malformed filter joins, and then its subscription fails with a system
// error (cdc_rls.ex :malformed_subscription_params).
func TestRealtimeJoins(t *testing.T) {
	p := supabasetest.New(t)
	p.Realtime.JoinErrorDelay = 300 * time.Millisecond
	member := p.NewMember(t, "joins@example.com")
	binding := map[string]any{"event": "*", "schema": "public", "table": "user_questions"}
	tests := []struct {
		name, token, topic string
		filter             string
		reason             string // "" joins
	}{
		{"service-role key", p.Key, "realtime:a", "", ""},
		{"member token", member.Token, "realtime:a", "", ""},
		{"legacy member token", supabasetest.Sign(p.MemberClaims(member.ID, "joins@example.com", false)), "realtime:a", "", ""},
		{"unknown kid", supabasetest.SignWithKey("ES256", "not-a-kid", foreignKey(t), p.MemberClaims(member.ID, "", false)), "realtime:a", "", `JwtSignerError: Failed to generate JWT signer for key ID (kid) "not-a-kid"`},
		{"no exp", supabasetest.Sign(map[string]any{"role": "authenticated", "sub": member.ID}), "realtime:a", "", "InvalidJWTToken: Fields `role` and `exp` are required in JWT"},
		{"expired", supabasetest.Sign(map[string]any{"role": "authenticated", "exp": time.Now().Add(-time.Minute).Unix()}), "realtime:a", "", "InvalidJWTToken: Token has expired"},
		{"other secret", p.Key[:strings.LastIndex(p.Key, ".")+1] + "c2lnbmF0dXJl", "realtime:a", "", "JwtSignatureError: Failed to validate JWT signature"},
		{"not a JWT", "not-a-jwt", "realtime:a", "", "MalformedJWT: The token provided is not a valid JWT"},
		{"bad filter", p.Key, "realtime:a", "status=nope.x", ""},
		{"no topic name", p.Key, "realtime:", "", "TopicNameRequired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := strings.Replace(p.URL, "http", "ws", 1) + "/realtime/v1/websocket?" + url.Values{"apikey": {p.AnonKey}, "vsn": {"2.0.0"}}.Encode()
			ws, _, err := websocket.DefaultDialer.Dial(u, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			s := &rawSocket{ws: ws, v2: true}
			b := maps.Clone(binding)
			if tc.filter != "" {
				b["filter"] = tc.filter
			}
			payload := map[string]any{"config": map[string]any{"postgres_changes": []any{b}}, "access_token": tc.token}
			start := time.Now()
			if err := ws.WriteJSON([]any{"1", "1", tc.topic, "phx_join", payload}); err != nil {
				t.Fatal(err)
			}
			m := s.read(t)
			took := time.Since(start)
			var r struct {
				Status   string
				Response struct{ Reason string }
			}
			if err := json.Unmarshal(m.Payload, &r); err != nil || m.Event != "phx_reply" {
				t.Fatalf("reply %s %s: %v", m.Event, m.Payload, err)
			}
			if tc.reason == "" {
				if r.Status != "ok" {
					t.Fatalf("refused: %s", m.Payload)
				}
				m = s.read(t)
				var sys struct{ Extension, Status, Message string }
				json.Unmarshal(m.Payload, &sys)
				want := []string{"postgres_changes", "ok", "Subscribed to PostgreSQL"}
				if tc.filter != "" {
					want = []string{"postgres_changes", "error", `Error parsing ` + "`filter`" + ` params: ["nope", "x"]`}
				}
				if got := []string{sys.Extension, sys.Status, sys.Message}; m.Event != "system" || !slices.Equal(got, want) {
					t.Errorf("after the join: %s %s; want system %q", m.Event, m.Payload, want)
				}
				return
			}
			if r.Status != "error" || !strings.HasPrefix(r.Response.Reason, tc.reason) {
				t.Errorf("reply %s; want error %q…", m.Payload, tc.reason)
			}
			if took < 300*time.Millisecond {
				t.Errorf("refused after %v; want no sooner than JoinErrorDelay (300 ms)", took)
			}
		})
	}
}
