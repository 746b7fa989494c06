package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/office-server/office-server/office"
)

// Metrics are the server's Prometheus metrics, in a registry of its own.
// Counters of office activity (messages, answers) are fed from the event
// log by the event tail, so they count what any writer did; gauges of
// current state (sessions, invocations) are computed at scrape time.
type Metrics struct {
	reg              *prometheus.Registry
	messages         *prometheus.CounterVec
	answersDelivered prometheus.Counter
	answerLatency    prometheus.Histogram
	viewers          prometheus.Gauge
	viewersDropped   prometheus.Counter
	viewerSkips      prometheus.Counter
}

func newMetrics(s *Server) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "office_messages_total", Help: "Office events (parsed messages, phases, steps, errors, lifecycle) by kind.",
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
	}
	m.reg.MustRegister(m.messages, m.answersDelivered, m.answerLatency, m.viewers, m.viewersDropped, m.viewerSkips,
		&stateCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if f := s.cfg.AuditFailures; f != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "office_audit_failures_total", Help: "Events the office could not append to the event log (the store refused them); each is also logged.",
		}, func() float64 { return float64(f()) }))
	}
	return m
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

// observeEvent counts ev by kind and, for an answer's delivery, measures its
// latency from the question row (answered_at → delivered_at).
func (m *Metrics) observeEvent(ctx context.Context, store Rows, ev office.Event) {
	m.messages.WithLabelValues(ev.Kind).Inc()
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
			for _, a := range agents {
				status := office.SessionStopped
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
