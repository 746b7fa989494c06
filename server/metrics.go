package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/office-server/office-server/office"
)

// Metrics are the server's Prometheus metrics, in a registry of its own
// (docs/metrics.md lists them). Counters of office activity (events,
// messages, answers) are fed from the event log by the event tail, so they
// count what any writer did; gauges of current state (sessions,
// invocations) are computed at scrape time. The serve command makes them
// before the store (NewMetrics) so that the store's requests and its
// change feed are measured from the start.
type Metrics struct {
	reg              *prometheus.Registry
	events           *prometheus.CounterVec
	messages         *prometheus.CounterVec
	answersDelivered prometheus.Counter
	answerLatency    prometheus.Histogram
	viewers          prometheus.Gauge
	viewersDropped   prometheus.Counter
	viewerSkips      prometheus.Counter
	previewScreens   prometheus.Gauge
	previewBytes     prometheus.Counter
	httpRequests     *prometheus.CounterVec
	httpLatency      *prometheus.HistogramVec
	storeLatency     *prometheus.HistogramVec
	storeErrors      *prometheus.CounterVec
	feedReconnects   prometheus.Counter
}

// NewMetrics returns the metrics with the build's, the process's and the
// Go runtime's registered; server.New adds those of the server's state.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "office_events_total", Help: "Events appended to the office event log, by kind (messages, lifecycle, refusals...).",
		}, []string{"kind"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "office_messages_total", Help: "Protocol messages the agents printed and the office acted on (message.* events), by message kind.",
		}, []string{"kind"}),
		answersDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "office_answers_delivered_total", Help: "Answers to questions typed into an agent's terminal.",
		}),
		answerLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "office_answer_delivery_seconds",
			Help:    "Time from a question being answered to the answer being delivered to the agent.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		viewers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "office_console_viewers", Help: "Console viewers attached to agents' terminals.",
		}),
		viewersDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "office_console_viewers_dropped_total", Help: "Console viewers dropped by their session because their queue filled.",
		}),
		viewerSkips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "office_console_viewer_skips_total", Help: "Times a console viewer fell behind (over its rate, paused too long, or dropped) and skipped ahead to a fresh replay.",
		}),
		previewScreens: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "office_console_preview_screens", Help: "Agents' screens watched by the console's tile previews (the tiles in view of every open page).",
		}),
		previewBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "office_console_preview_bytes_total", Help: "Bytes of screen rows sent to the console's tile previews.",
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "office_http_requests_total", Help: "HTTP requests answered, by route (the handler's pattern; \"unmatched\" for none) and status code.",
		}, []string{"route", "status"}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "office_http_request_seconds", Help: "Time to answer an HTTP request, by route (a WebSocket or event stream: its whole life).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "office_store_request_seconds", Help: "Store requests by operation (the office.Store method), successful or not, and their duration.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "office_store_errors_total", Help: "Store requests that failed, by operation and error code (not_found and conflict are answers, the others failures).",
		}, []string{"op", "code"}),
		feedReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "office_change_feed_reconnects_total", Help: "Times the store's change feed (PostgreSQL LISTEN, Supabase Realtime) was lost and connected again.",
		}),
	}
	b := ReadBuild()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "office_build_info", Help: "Always 1: the running binary's module version, VCS commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	build.Set(1)
	m.reg.MustRegister(m.events, m.messages, m.answersDelivered, m.answerLatency, m.viewers, m.viewersDropped, m.viewerSkips,
		m.previewScreens, m.previewBytes,
		m.httpRequests, m.httpLatency, m.storeLatency, m.storeErrors, m.feedReconnects, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register adds the metrics of s's state: sessions and invocations at
// scrape time, and the office's audit failures.
func (m *Metrics) register(s *Server) {
	m.reg.MustRegister(&stateCollector{s: s})
	if f := s.cfg.AuditFailures; f != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "office_audit_failures_total", Help: "Events the office could not append to the event log (the store refused them); each is also logged.",
		}, func() float64 { return float64(f()) }))
	}
}

// ObserveStore records one store request (store/metered's observer).
func (m *Metrics) ObserveStore(op string, d time.Duration, err error) {
	m.storeLatency.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.storeErrors.WithLabelValues(op, office.ErrorCode(err)).Inc()
	}
}

// FeedReconnected counts one reconnection of the change feed.
func (m *Metrics) FeedReconnected() { m.feedReconnects.Inc() }

// observeHTTP records one answered request.
func (m *Metrics) observeHTTP(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpLatency.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry returns the registry, so other parts can add their metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AnswerDelivered records one answer delivered after latency.
func (m *Metrics) AnswerDelivered(latency time.Duration) {
	m.answersDelivered.Inc()
	m.answerLatency.Observe(latency.Seconds())
}

// observeEvent counts ev by kind (and, for a protocol message, the
// message by its kind) and, for an answer's delivery, measures its
// latency from the question row (answered_at → delivered_at).
func (m *Metrics) observeEvent(ctx context.Context, store Rows, ev office.Event) {
	m.events.WithLabelValues(ev.Kind).Inc()
	if kind, ok := strings.CutPrefix(ev.Kind, "message."); ok {
		m.messages.WithLabelValues(kind).Inc()
	}
	k := strings.ToLower(ev.Kind)
	if !strings.Contains(k, "deliver") || !(strings.Contains(k, "answer") || strings.Contains(k, "question")) {
		return
	}
	var p struct {
		QuestionID string     `json:"question_id"`
		ID         string     `json:"id"`
		AnsweredAt *time.Time `json:"answered_at"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	if p.AnsweredAt != nil && !ev.CreatedAt.IsZero() {
		// The office says when the answer came: the event is the delivery.
		m.AnswerDelivered(max(ev.CreatedAt.Sub(*p.AnsweredAt), 0))
		return
	}
	id := p.QuestionID
	if id == "" {
		id = p.ID
	}
	if id == "" {
		m.answersDelivered.Inc()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	q, err := store.GetQuestion(ctx, id)
	if err != nil || q.AnsweredAt == nil {
		m.answersDelivered.Inc()
		return
	}
	end := ev.CreatedAt
	if q.DeliveredAt != nil {
		end = *q.DeliveredAt
	}
	m.AnswerDelivered(max(end.Sub(*q.AnsweredAt), 0))
}

// stateCollector reports the current sessions by status and invocations by
// status at scrape time.
type stateCollector struct{ s *Server }

var (
	sessionsDesc    = prometheus.NewDesc("office_sessions", "Agent sessions by status.", []string{"status"}, nil)
	invocationsDesc = prometheus.NewDesc("office_invocations", "Invocations by status.", []string{"status"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- invocationsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st := c.s.cfg.Store
	offices, err := st.ListOffices(ctx)
	if err != nil {
		return
	}
	sessions := map[string]int{}
	invs := map[string]int{}
	for _, o := range offices {
		if agents, err := st.ListAgents(ctx, o.ID); err == nil {
			asleep := c.s.hibernatedAgents(ctx, o.ID)
			for _, a := range agents {
				status := office.SessionStopped
				if asleep[a.ID] {
					status = office.SessionHibernated
				}
				if t, ok := c.s.cfg.Terminals.Terminal(o.ID, a.ID); ok {
					status = t.Status()
				}
				sessions[status]++
			}
		}
		if list, err := st.ListInvocations(ctx, office.InvocationFilter{OfficeID: o.ID}); err == nil {
			for _, inv := range list {
				invs[inv.Status]++
			}
		}
	}
	for k, v := range sessions {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(v), k)
	}
	for k, v := range invs {
		ch <- prometheus.MustNewConstMetric(invocationsDesc, prometheus.GaugeValue, float64(v), k)
	}
}
