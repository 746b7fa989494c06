// The office console, for the person operating an office: what needs them
// first (questions, permission requests, dependency requests, agents whose
// terminal waits or whose process crashed), each answerable in place; what
// each agent is doing (status, task, step, phase, for how long); the calls
// between agents and their results; the history as sentences; and any
// agent's terminal over the console WebSocket (framing documented in
// server/console.go), drawn at the session's own size and scaled to fit.
//
// Lists are keyed by row id and updated in place: a refresh never replaces
// an element a person is about to click or typing into. The admin token
// travels as an HttpOnly cookie set when the page was opened with ?token=.
'use strict';

const F = { OUTPUT: 1, INPUT: 2, RESIZE: 3, PAUSE: 4, RESUME: 5, TAKE: 6, RELEASE: 7, STATUS: 8, RESET: 9 };
const $ = (sel) => document.querySelector(sel);
const state = {
  office: null, agents: [], questions: [], deps: [], invs: [], results: [],
  events: [], lastEvent: 0, activity: {}, es: null, refreshTimer: null, term: null,
  minis: {}, // pinned terminal previews by agent id
  newEvents: [], eventsFrame: 0, // events not yet drawn in the history
  pushed: {}, // agent id → the status its last session event said, and when it came
  drawFrame: 0,
  wantRows: new Map(), rowTimer: 0, // rows to read by id (updateRows)
  edits: [], // rows changed by events, kept a minute: a list read begun before one does not undo it
};

// ---- helpers ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
  return e;
}

// add appends kids to e, leaving out null, undefined and false (the DOM's
// own append would print them as text: "null").
function add(e, ...kids) {
  for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
  return e;
}

// setText changes an element's text only when it differs (no needless
// layout, no lost selection).
function setText(e, text) { if (e.textContent !== text) e.textContent = text; }
function setAttr(e, k, v) { if (e.getAttribute(k) !== v) e.setAttribute(k, v); }

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
  const res = await fetch(path, opts);
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = new Error((data && data.error && data.error.message) || `${res.status} ${res.statusText}`);
    err.status = res.status;
    throw err;
  }
  return data;
}

function note(msg) { $('#note').textContent = msg || ''; }

const short = (s, n) => { s = (s || '').replace(/\s+/g, ' ').trim(); return s.length > n ? s.slice(0, n - 1) + '…' : s; };
const localTime = (t) => (t ? new Date(t).toLocaleTimeString() : '');

function duration(ms) {
  if (!(ms >= 0)) return '';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

const agentById = (id) => state.agents.find((a) => a.id === id);
const agentName = (id) => { const a = agentById(id); return a ? a.name : (id ? id.slice(0, 8) : 'the office'); };

// sync makes container's children one per item, in order, keyed by
// key(item): an existing child is kept and update(child, item) refreshes
// it; a new one is made by make(item); children whose item is gone are
// removed (and given to gone, if any). Elements are never replaced, so
// clicks and typing survive.
function sync(container, items, key, make, update, gone) {
  const have = new Map();
  for (const c of [...container.children]) {
    if (c.dataset.key === undefined) continue;
    have.set(c.dataset.key, c);
  }
  const want = new Set(items.map(key));
  for (const [k, c] of have) if (!want.has(k)) { c.remove(); if (gone) gone(c); }
  let prev = null;
  for (const it of items) {
    const k = key(it);
    let c = have.get(k);
    if (!c) { c = make(it); c.dataset.key = k; }
    if (update) update(c, it);
    const next = prev ? prev.nextElementSibling : container.firstElementChild;
    if (next !== c) container.insertBefore(c, next);
    prev = c;
  }
}

// act runs a request from a card or row: its buttons are disabled
// meanwhile, its error shows in the card (the person's typing stays).
async function act(card, what, fn) {
  const err = card.querySelector('.error');
  const buttons = [...card.querySelectorAll('button')];
  buttons.forEach((b) => { b.disabled = true; });
  try {
    await fn();
    if (err) setText(err, '');
    // An answered card leaves with the event that says so: dim it meanwhile.
    if (card.matches('.question, .permission, .dependency')) card.classList.add('done');
  } catch (e) {
    if (err) setText(err, `${what}: ${e.message}`); else note(`${what}: ${e.message}`);
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
  // No list is read here: what the action changed comes back as events
  // (an answered question leaves, a stopped agent shows stopped).
}

// ---- office and refresh ----

async function loadOffices() {
  const offices = await api('GET', '/api/offices');
  const sel = $('#office');
  sel.replaceChildren(...offices.map((o) => el('option', { value: o.id }, o.name)));
  if (!offices.length) { note('no offices yet: start the server with --office office.yaml'); return; }
  const want = new URLSearchParams(location.hash.slice(1)).get('office');
  const o = offices.find((x) => x.id === want || x.name === want) || offices[0];
  sel.value = o.id;
  selectOffice(o.id);
}

async function selectOffice(id) {
  for (const a of Object.keys(state.minis)) unpin(a);
  closePreviews();
  state.office = id;
  state.lastEvent = 0;
  state.events = [];
  state.newEvents = [];
  state.activity = {};
  $('#events').replaceChildren();
  await refresh(); // agents first, so events show names
  openEvents();
}

// lists are the office's lists the page reads, by the name it keeps them
// under.
const lists = {
  agents: (o) => `/api/offices/${o}/agents`,
  questions: (o) => `/api/offices/${o}/questions?status=pending`,
  deps: (o) => `/api/offices/${o}/dependencies?status=pending`,
  invs: (o) => `/api/offices/${o}/invocations?limit=100`,
  results: (o) => `/api/offices/${o}/results?limit=50`,
};

// scheduleRefresh reads the named lists (all of them without names) once,
// 250 ms from the first call, whatever is asked meanwhile.
function scheduleRefresh(names) {
  state.want = state.want || new Set();
  for (const n of names || Object.keys(lists)) state.want.add(n);
  if (state.refreshTimer || !state.want.size) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = null; const want = [...state.want]; state.want.clear(); refresh(want); }, 250);
}

async function refresh(names) {
  if (!state.office) return;
  const o = encodeURIComponent(state.office);
  const began = performance.now();
  names = names || Object.keys(lists);
  try {
    const got = await Promise.all(names.map((n) => api('GET', lists[n](o))));
    const next = Object.fromEntries(names.map((n, i) => [n, got[i]]));
    // A row an event changed after this read began is newer than the list.
    for (const e of state.edits) if (e.at > began && next[e.list]) next[e.list] = placeRow(next[e.list], e.list, e.id, e.row);
    if (next.agents) {
      // A status pushed by the event stream after this read began is newer
      // than what the read returned.
      for (const a of next.agents) {
        const p = state.pushed[a.id];
        if (p && p.at > began) Object.assign(a, p.status);
      }
      liveStatus(next.agents);
    }
    Object.assign(state, next);
    setText($('#agentserror'), '');
    render();
  } catch (e) { setText($('#agentserror'), 'refresh: ' + e.message); }
}

function render() {
  renderNeeds();
  renderAgents();
  renderTermStatus();
  renderCalls();
  renderResults();
  renderAgentFilter();
}

// ---- what needs me ----

const attentionStatuses = ['needs_attention', 'crashed', 'failed'];

// needs lists, in order, everything that waits for a person. An agent
// whose terminal shows the dialog of a permission request already listed
// is not listed again: the request's card shows the dialog too.
function needs() {
  const out = [];
  const asking = new Set(state.questions.filter((q) => q.category === 'permission').map((q) => q.agent_id));
  for (const q of state.questions) {
    if (q.category === 'permission') out.push({ key: 'q' + q.id, kind: 'permission', q, a: agentById(q.agent_id) });
    else out.push({ key: 'q' + q.id, kind: 'question', q });
  }
  for (const d of state.deps) out.push({ key: 'd' + d.id, kind: 'dependency', d });
  for (const a of state.agents) {
    if (!attentionStatuses.includes(a.session_status)) continue;
    if (a.session_status === 'needs_attention' && asking.has(a.id)) continue;
    out.push({ key: 'a' + a.id, kind: 'agent', a });
  }
  return out;
}

function renderNeeds() {
  const items = needs();
  const n = items.length;
  $('#attention').hidden = n === 0;
  const c = $('#needcount');
  setText(c, n ? `${n} need${n === 1 ? 's' : ''} you` : 'nothing needs you');
  c.dataset.count = String(n);
  c.className = 'pill ' + (n ? 'hot' : 'zero');
  document.title = n ? `(${n}) Office console` : 'Office console';
  sync($('#needlist'), items, (i) => i.key, needCard, updateNeedCard);
}

function needCard(i) {
  switch (i.kind) {
    case 'permission': return permissionCard(i.q);
    case 'question': return questionCard(i.q);
    case 'dependency': return dependencyCard(i.d);
    default: return agentCard(i.a);
  }
}

function updateNeedCard(card, i) {
  if (i.kind === 'permission') {
    const dialog = i.a && i.a.session_status === 'needs_attention' ? i.a.session_detail || '' : '';
    const pre = card.querySelector('.dialog');
    pre.hidden = !dialog;
    setText(pre, dialog);
    // The same request as the agent's terminal shows it: its choices
    // answer it there (the office's request ends with it).
    if (dialog) dialogButtons(card, i.a, dialog); else card.querySelector('.choices').hidden = true;
  }
  if (i.kind === 'agent' && i.a.session_status === 'needs_attention') dialogButtons(card, i.a, i.a.session_detail);
  if (i.kind === 'agent') {
    setText(card.querySelector('.pill'), statusLabel(i.a.session_status));
    card.querySelector('.pill').className = 'pill ' + i.a.session_status;
    setText(card.querySelector('.detail'), i.a.session_detail || reasonMissing(i.a.session_status));
    card.querySelector('.choices').hidden = i.a.session_status !== 'needs_attention' || !dialogChoices(i.a.session_detail).length;
  }
}

// dialogChoices reads the numbered choices of a dialog's text as the
// agent's terminal shows it (Claude Code, Codex, Gemini CLI draw
// "❯ 1. Yes" / "  2. No…", the marker on the selected one): [{n, label,
// selected}], in order; none when the text has no numbered list.
function dialogChoices(text) {
  const out = [];
  for (const line of (text || '').split('\n')) {
    const m = line.match(/^\s*(?:[│|]\s*)?([❯›>●▶]\s*)?(\d{1,2})[.)]\s+(.+?)\s*[│|]?\s*$/);
    if (!m) continue;
    const n = Number(m[2]);
    if (out.length && n !== out[out.length - 1].n + 1) continue; // not the same list
    if (!out.length && n !== 1) continue;
    out.push({ n, label: m[3], selected: !!m[1] });
  }
  return out.length >= 2 ? out : [];
}

// choiceKeys are the keys that pick choice c in an arrow-key list whose
// selected entry is sel: Up or Down as many times as needed, then Enter
// (what a person would press; a digit would do in some CLIs, not all).
function choiceKeys(choices, c) {
  const sel = Math.max(0, choices.findIndex((x) => x.selected));
  const to = choices.indexOf(c);
  const key = to > sel ? '\x1b[B' : '\x1b[A';
  return key.repeat(Math.abs(to - sel)) + '\r';
}

// dialogButtons shows a dialog's choices as buttons that send exactly
// that choice to the agent's terminal (keys), with the choice's own words
// (what it will do); empty when the dialog has no list of choices.
function dialogButtons(card, a, text) {
  const box = card.querySelector('.choices');
  const choices = dialogChoices(text);
  const sig = choices.map((c) => c.n + c.label + c.selected).join('|');
  if (box.dataset.sig === sig) return;
  box.dataset.sig = sig;
  box.replaceChildren(...choices.map((c) => el('button', {
    type: 'button', class: 'choice' + (c.selected ? ' selected' : ''), 'data-choice': String(c.n), title: `press ${choiceKeys(choices, c).replace(/\x1b\[A/g, '↑').replace(/\x1b\[B/g, '↓').replace('\r', 'Enter')} in ${a.name}'s terminal`,
    onclick: () => act(card, `answer ${a.name}'s dialog`, () => sendKeys(a, choiceKeys(choices, c))),
  }, `${c.n}. ${c.label}`)));
  box.hidden = choices.length === 0;
}

// sendKeys types keys into an agent's terminal through the console
// WebSocket: take control, send, give control back. The open terminal of
// the agent is used when it holds control already.
function sendKeys(a, keys) {
  const bytes = new TextEncoder().encode(keys);
  for (const t of openTerms()) {
    if (t.agent.id === a.id && t.control === 'you') { t.send(F.INPUT, bytes); return Promise.resolve(); }
  }
  return new Promise((resolve, reject) => {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/ws/offices/${encodeURIComponent(state.office)}/agents/${a.id}`);
    ws.binaryType = 'arraybuffer';
    let asked = false, done = false;
    const frame = (type, body) => { const f = new Uint8Array(1 + (body ? body.length : 0)); f[0] = type; if (body) f.set(body, 1); ws.send(f); };
    const finish = (err) => { if (done) return; done = true; clearTimeout(timer); ws.close(); err ? reject(err) : resolve(); };
    const timer = setTimeout(() => finish(new Error('the terminal did not answer')), 5000);
    ws.onmessage = (m) => {
      const b = new Uint8Array(m.data);
      if (b[0] !== F.STATUS) return;
      const st = JSON.parse(new TextDecoder().decode(b.subarray(1)));
      if (st.control === 'you') { frame(F.INPUT, bytes); frame(F.RELEASE); setTimeout(() => finish(), 100); return; }
      if (st.control === 'other') { finish(new Error('another viewer has control of the terminal')); return; }
      if (!asked) { asked = true; frame(F.TAKE); }
    };
    ws.onerror = () => finish(new Error('the terminal is not reachable'));
    ws.onclose = (e) => finish(new Error('terminal closed' + (e.reason ? ': ' + e.reason : '')));
  });
}

function reasonMissing(status) {
  return status === 'needs_attention' ? 'the agent waits for a person in its terminal' : 'no reason recorded';
}

function permissionCard(q) {
  const reason = el('input', { class: 'reason', name: 'reason', placeholder: 'reason (told to the agent with a deny)', autocomplete: 'off' });
  const card = el('div', { class: 'card attention permission', 'data-id': q.id, 'data-agent': agentName(q.agent_id), 'data-name': agentName(q.agent_id), 'data-agent-id': q.agent_id });
  const send = (text) => act(card, 'permission', () => api('POST', `/api/questions/${q.id}/answer`, { response: text }));
  const expires = q.expires_at ? localTime(q.expires_at) : '';
  add(card,
    el('div', { class: 'meta' }, `Permission request from ${agentName(q.agent_id)}`, expires ? ` · denied at ${expires} if nobody answers` : ''),
    el('div', { class: 'text' }, q.question),
    q.context ? el('pre', { class: 'detail' }, q.context) : null,
    el('div', {},
      el('button', { type: 'button', class: 'allow', onclick: () => send('allow once') }, 'Allow once'), ' ',
      el('button', { type: 'button', class: 'allow-session', onclick: () => send('allow for this session') }, 'Allow for this session'), ' ',
      reason, ' ',
      el('button', { type: 'button', class: 'deny', onclick: () => send(reason.value.trim() ? 'deny: ' + reason.value.trim() : 'deny') }, 'Deny'), ' ',
      el('button', { type: 'button', class: 'open', onclick: () => openTerminal(agentById(q.agent_id) || { id: q.agent_id, name: agentName(q.agent_id) }) }, 'open terminal')),
    el('pre', { class: 'detail dialog', hidden: true }),
    el('div', { class: 'choices', hidden: true }),
    el('div', { class: 'error' }));
  return card;
}

function questionCard(q) {
  const input = el('input', { class: 'answer', name: 'answer', placeholder: q.default_answer ? `default: ${q.default_answer}` : 'your answer', autocomplete: 'off' });
  const card = el('form', { class: 'card question', 'data-id': q.id, 'data-agent': agentName(q.agent_id), 'data-agent-id': q.agent_id });
  const send = (text) => act(card, 'answer', () => api('POST', `/api/questions/${q.id}/answer`, { response: text }));
  card.addEventListener('submit', (ev) => { ev.preventDefault(); if (input.value.trim()) send(input.value); });
  const opts = (q.options || []).map((o) => el('button', { type: 'button', class: 'option', 'data-option': o, onclick: () => send(o) }, o));
  const expires = q.expires_at ? ` · expires ${localTime(q.expires_at)}` : '';
  add(card,
    el('div', { class: 'meta' }, `${agentName(q.agent_id)} asks · ${localTime(q.created_at)}${expires}`),
    el('div', { class: 'text' }, q.question),
    q.context ? el('div', { class: 'context' }, q.context) : null,
    opts.length ? el('div', { class: 'options' }, ...opts) : null,
    el('div', {}, input, ' ', el('button', { class: 'answer-submit' }, 'Answer')),
    el('div', { class: 'error' }));
  return card;
}

function dependencyCard(d) {
  const value = el('input', { class: 'value', type: d.type === 'api_key' ? 'password' : 'text', placeholder: d.default || 'value', autocomplete: 'off' });
  const reason = el('input', { class: 'reason', placeholder: 'reason to reject', autocomplete: 'off' });
  const card = el('div', { class: 'card dependency', 'data-id': d.id, 'data-agent-id': d.agent_id });
  const call = (what, body) => act(card, what, () => api('POST', `/api/dependencies/${d.id}/${what}`, body));
  add(card,
    el('div', { class: 'meta' }, `${agentName(d.agent_id)} needs ${d.type} ${d.required ? '(required)' : '(optional)'}`),
    el('div', {}, el('strong', {}, d.name), d.description ? ' — ' + d.description : ''),
    el('div', {}, value, ' ', el('button', { type: 'button', class: 'provide', onclick: () => call('provide', { value: value.value }) }, 'Provide')),
    el('div', {}, reason, ' ', el('button', { type: 'button', class: 'reject', onclick: () => call('reject', { reason: reason.value }) }, 'Reject')),
    el('div', { class: 'error' }));
  return card;
}

// agentCard: an agent whose terminal waits for a person (a dialog: its
// text, and its choices as buttons), or whose process ended (its reason).
// Restart sits apart from the answers and asks to be confirmed.
function agentCard(a) {
  const card = el('div', { class: 'card attention agent', 'data-name': a.name, 'data-id': a.id, id: 'need-' + a.id });
  return add(card,
    el('div', { class: 'meta' }, `${a.name}: `, el('span', { class: 'pill ' + a.session_status }, statusLabel(a.session_status))),
    el('pre', { class: 'detail dialogtext' }, a.session_detail || reasonMissing(a.session_status)),
    el('div', { class: 'choices', hidden: true }),
    el('div', { class: 'cardactions' },
      el('button', { type: 'button', class: 'open', onclick: () => openTerminal(agentById(a.id) || a) }, 'open terminal'),
      el('button', { type: 'button', class: 'restart danger', onclick: (ev) => confirmClick(ev.currentTarget, 'restart', () => agentAction(card, agentById(a.id) || a, 'restart')) }, 'restart…')),
    el('div', { class: 'error' }));
}

// confirmClick makes a destructive button ask once more: the first click
// turns it into "confirm <what>" for four seconds, the second acts.
function confirmClick(btn, what, fn) {
  if (btn.dataset.armed === 'yes') {
    clearTimeout(btn.armTimer);
    btn.dataset.armed = '';
    setText(btn, btn.dataset.label);
    fn();
    return;
  }
  btn.dataset.label = btn.textContent;
  btn.dataset.armed = 'yes';
  setText(btn, `confirm ${what}`);
  btn.armTimer = setTimeout(() => { btn.dataset.armed = ''; setText(btn, btn.dataset.label); }, 4000);
}

// ---- agents ----

// One status per agent, shown by its row, the needs-you list and its
// terminal's header alike. It comes from the agents list, except for the
// agent whose terminal is open: its STATUS frames (sent within 250 ms of a
// change, from the same session) are newer than any list, so they set the
// status (termStatus) and a list read meanwhile does not undo them.
function liveStatus(agents) {
  const t = state.term;
  if (!t || !t.st) return;
  const a = agents.find((x) => x.id === t.agent.id);
  if (!a || a.session_status === t.st.session) return;
  a.session_status = t.st.session;
  a.session_detail = t.st.detail || '';
  a.session_since = t.since;
}

// termStatus takes the open terminal's STATUS frame as its agent's status.
function termStatus(t, st) {
  const a = agentById(t.agent.id);
  if (!t.st || t.st.session !== st.session) {
    t.since = a && a.session_status === st.session ? a.session_since : new Date().toISOString();
  }
  t.st = st;
  if (a && (a.session_status !== st.session || (a.session_detail || '') !== (st.detail || ''))) {
    a.session_status = st.session;
    a.session_detail = st.detail || '';
    a.session_since = t.since;
    render();
  } else renderTermStatus();
}

function renderTermStatus() {
  const t = state.term;
  if (!t || !t.st) return;
  const st = t.st;
  const a = agentById(t.agent.id);
  const session = a ? a.session_status : st.session;
  setText($('#termstatus'), `${statusLabel(session)} · ${st.cols}×${st.rows} · ${st.viewers} viewer(s) · ${st.control === 'you' ? 'you have control' : st.control === 'other' ? 'another viewer has control' : 'read-only'}`);
  $('#termbar').dataset.session = session;
}

const statusLabels = {
  ready: 'waiting for input', busy: 'working', waiting: 'waiting for a result', needs_attention: 'waits for a person',
  starting: 'starting', stopped: 'stopped', exited: 'exited', crashed: 'crashed', failed: 'failed to start',
  hibernated: 'hibernated',
};
const statusLabel = (s) => statusLabels[s] || s || 'unknown';

// doing says what an agent works on: its open task and from whom, its last
// step and phase (from the history).
function doing(a) {
  const parts = [];
  const task = state.invs.find((i) => i.callee_agent_id === a.id && (i.status === 'in_progress' || i.status === 'pending'));
  if (task) parts.push(`task from ${agentName(task.caller_agent_id)}: ${short(task.reason, 70)}`);
  // Who it waits for: the agents it gave a task that is not done.
  const callees = state.invs.filter((i) => i.caller_agent_id === a.id && (i.status === 'in_progress' || i.status === 'pending'));
  if (callees.length) parts.push(`waits for ${[...new Set(callees.map((i) => agentName(i.callee_agent_id)))].join(', ')}`);
  const now = state.activity[a.id] || {};
  if (now.step) parts.push(`step ${now.step}`);
  if (now.phase) parts.push(`phase ${now.phase}`);
  return parts;
}

// agentFilters choose the agents the table shows.
const agentFilters = {
  all: () => true,
  needs: (a) => !!waitsFor(a) || ['crashed', 'failed'].includes(a.session_status),
  busy: (a) => ['busy', 'waiting', 'starting'].includes(a.session_status),
  failed: (a) => ['crashed', 'failed', 'exited'].includes(a.session_status),
  hibernated: (a) => a.session_status === 'hibernated',
};

function renderAgents() {
  const f = agentFilters[state.agentFilter || 'all'];
  const shown = state.agents.filter(f);
  for (const b of document.querySelectorAll('#agentfilter button[data-filter]')) {
    const n = state.agents.filter(agentFilters[b.dataset.filter]).length;
    setText(b, `${b.dataset.label} (${n})`);
    b.classList.toggle('on', (state.agentFilter || 'all') === b.dataset.filter);
  }
  sync($('#agents tbody'), shown, (a) => a.id, agentRow, updateAgentRow, forgetRow);
  const sel = $('#msgagent');
  const cur = sel.value;
  sync(sel, state.agents, (a) => a.id, (a) => el('option', { value: a.id }, a.name), (o, a) => setText(o, a.name));
  if (state.agents.some((a) => a.id === cur)) sel.value = cur;
}

function agentRow(a) {
  const tr = el('tr', { class: 'agent', 'data-name': a.name, 'data-id': a.id },
    el('td', {}, el('a', { href: '#', class: 'open', onclick: (ev) => { ev.preventDefault(); openTerminal(agentById(a.id) || a); } }, a.name),
      el('div', { class: 'meta role' })),
    el('td', { class: 'status' }, el('span', { class: 'pill' }), el('span', { class: 'since meta' }),
      el('a', { class: 'waits', href: '#attention', hidden: true, onclick: (ev) => { ev.preventDefault(); showNeed(a.id); } }),
      el('div', { class: 'detail short' })),
    el('td', { class: 'doing' }),
    previewCell(a),
    el('td', { class: 'actions' },
      el('button', { type: 'button', class: 'peek', title: 'a small live preview of its terminal, beside the open one', onclick: () => peek(agentById(a.id) || a) }, 'peek'), ' ',
      el('button', { type: 'button', class: 'start', onclick: () => agentAction(tr, agentById(a.id) || a, 'start') }, 'start'), ' ',
      el('button', { type: 'button', class: 'stop danger', onclick: (ev) => confirmClick(ev.currentTarget, 'stop', () => agentAction(tr, agentById(a.id) || a, 'stop')) }, 'stop…'), ' ',
      el('button', { type: 'button', class: 'restart danger', onclick: (ev) => confirmClick(ev.currentTarget, 'restart', () => agentAction(tr, agentById(a.id) || a, 'restart')) }, 'restart…'),
      el('div', { class: 'error' })));
  if (rowObserver) rowObserver.observe(tr);
  return tr;
}

function updateAgentRow(tr, a) {
  setAttr(tr, 'data-status', a.session_status);
  // Start for an agent whose process is not running, stop for one that is;
  // a hibernated one can be woken or stopped for good.
  const running = !['stopped', 'exited', 'crashed', 'failed', undefined, null, ''].includes(a.session_status);
  const asleep = a.session_status === 'hibernated';
  tr.querySelector('button.start').hidden = running && !asleep;
  setText(tr.querySelector('button.start'), asleep ? 'wake' : 'start');
  tr.querySelector('button.stop').hidden = !running;
  // Its terminal opened, peeked or restarted would wake it too: wake says so.
  tr.querySelector('button.peek').hidden = asleep;
  tr.querySelector('button.restart').hidden = asleep;
  setText(tr.querySelector('.role'), a.role || '');
  const pill = tr.querySelector('.pill');
  setText(pill, statusLabel(a.session_status));
  pill.className = 'pill ' + a.session_status;
  setText(tr.querySelector('.since'), sinceText(a));
  // A process that ended: its last words say why; a dialog: its title.
  const lines = (a.session_detail || '').split('\n').map((l) => l.trim()).filter(Boolean);
  const ended = ['crashed', 'failed', 'exited'].includes(a.session_status);
  const detail = lines.length ? (ended ? lines[lines.length - 1] : lines[0]) : '';
  const d = tr.querySelector('.detail');
  setText(d, short(detail, 90));
  d.title = a.session_detail || '';
  const doingCell = tr.querySelector('.doing');
  const parts = doing(a);
  // Waiting for a person: its question or its dialog, linked to the card.
  const w = waitsFor(a);
  const link = tr.querySelector('.waits');
  link.hidden = !w;
  setText(link, w ? ` waits for you: ${w} ↑` : '');
  setAttr(tr, 'data-waits', w ? 'yes' : '');
  if (w) parts.unshift(`waits for a person (${w})`);
  setText(doingCell, parts.join(' · ') || (a.session_status === 'ready' ? 'idle' : a.session_status === 'busy' ? 'working' : ''));
  // Only the status in other words: the grid's tile leaves it out.
  setAttr(doingCell, 'data-plain', parts.length ? '' : 'yes');
}

// sinceText says for how long an agent is in its status.
function sinceText(a) {
  const since = a.session_since ? Date.now() - new Date(a.session_since).getTime() : NaN;
  return since >= 0 ? ` for ${duration(since)}` : '';
}

// tickDurations counts on the durations ("for 12s") of the rows in view,
// touching nothing else: the 200 rows of a big office changed every
// second kept Chromium's main thread 16% busy on an idle page
// (TestConsoleTwoHundredAgents), the rows in view alone 1%.
const rowsInView = new Set();
const rowObserver = window.IntersectionObserver ? new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (e.isIntersecting) { rowsInView.add(e.target); tickRow(e.target); } else rowsInView.delete(e.target);
  }
}) : null;

function tickRow(tr) {
  const a = agentById(tr.dataset.id);
  if (a) setText(tr.querySelector('.since'), sinceText(a));
}

function tickDurations() {
  if (!state.office) return;
  if (!rowObserver) { document.querySelectorAll('#agents tr.agent').forEach(tickRow); return; }
  for (const tr of rowsInView) if (tr.isConnected) tickRow(tr); else rowsInView.delete(tr);
}

// waitsFor says what of an agent waits for a person: a question, a
// permission request, a dependency, a dialog in its terminal.
function waitsFor(a) {
  const q = state.questions.find((x) => x.agent_id === a.id);
  if (q) return q.category === 'permission' ? 'a permission' : 'a question';
  if (state.deps.some((d) => d.agent_id === a.id)) return 'a dependency';
  if (a.session_status === 'needs_attention') return 'a dialog';
  return '';
}

// showNeed scrolls to the card of what an agent waits for and marks it.
function showNeed(agentId) {
  const card = [...document.querySelectorAll('#needlist .card')].find((c) =>
    c.dataset.id === agentId || c.dataset.agentId === agentId);
  if (!card) return;
  card.scrollIntoView({ block: 'center' });
  card.classList.add('flash');
  setTimeout(() => card.classList.remove('flash'), 1500);
  const b = card.querySelector('button.choice, button.option, button.allow, input');
  if (b) b.focus();
}

async function agentAction(row, a, action) {
  await act(row, `${action} ${a.name}`, () => api('POST', `/api/offices/${encodeURIComponent(state.office)}/agents/${a.id}/${action}`));
}

// ---- tile previews ----

// Each tile in view shows its agent's screen, small and live: the rows
// as text, from the office's preview socket (GET /ws/offices/{office}/
// previews, framing in server/preview.go). One socket for the page; it
// watches only the tiles in view (an IntersectionObserver says which), so
// 200 agents cost what the dozen on screen cost. A preview is text in a
// <pre>, not a terminal: no emulator per tile, and nothing it could type.
const previews = {
  ws: null, io: null, timer: 0,
  visible: new Map(), // agent id → its preview cell, while in view
  watching: null, // the ids last sent, joined
  screens: {}, // agent id → {live, cols, rows, lines}
  stats: { connects: 0, messages: 0, bytes: 0, updates: 0, agents: {} }, // what the socket brought (agents: updates by agent id)
};

function previewCell(a) {
  const td = el('td', { class: 'preview', 'data-id': a.id, title: `${a.name}'s screen, live (click to open its terminal)`,
    onclick: () => openTerminal(agentById(a.id) || a) }, el('pre', { class: 'screen' }));
  if (!previews.io && window.IntersectionObserver) {
    previews.io = new IntersectionObserver((entries) => {
      for (const e of entries) {
        if (e.isIntersecting) previews.visible.set(e.target.dataset.id, e.target);
        else previews.visible.delete(e.target.dataset.id);
      }
      scheduleWatch();
    });
  }
  if (previews.io) previews.io.observe(td);
  const s = previews.screens[a.id];
  if (s) drawPreview(td, s);
  return td;
}

// forgetRow stops watching a row the list removed: its duration, its
// preview.
function forgetRow(tr) {
  if (rowObserver) { rowObserver.unobserve(tr); rowsInView.delete(tr); }
  const td = tr.querySelector('td.preview');
  if (!td || !previews.io) return;
  previews.io.unobserve(td);
  if (previews.visible.get(td.dataset.id) === td) { previews.visible.delete(td.dataset.id); scheduleWatch(); }
}

// scheduleWatch tells the server the tiles in view, 100 ms after the
// first change (a scroll moves many at once).
function scheduleWatch() {
  if (!previews.timer) previews.timer = setTimeout(watchNow, 100);
}

function watchNow() {
  previews.timer = 0;
  const ids = [...previews.visible.keys()].sort();
  if (!previews.ws) { if (ids.length && state.office) connectPreviews(); return; }
  if (previews.ws.readyState !== WebSocket.OPEN || ids.join(' ') === previews.watching) return;
  previews.ws.send(JSON.stringify({ watch: ids }));
  previews.watching = ids.join(' ');
  // What the server no longer sends is stale: a tile back in view is
  // sent its screen whole.
  for (const id of Object.keys(previews.screens)) if (!previews.visible.has(id)) delete previews.screens[id];
}

function connectPreviews() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}/ws/offices/${encodeURIComponent(state.office)}/previews`);
  previews.ws = ws;
  previews.watching = null;
  previews.stats.connects++;
  ws.onopen = () => watchNow();
  ws.onmessage = (m) => {
    previews.stats.messages++;
    previews.stats.bytes += m.data.length;
    for (const u of JSON.parse(m.data).screens || []) applyPreview(u);
  };
  ws.onclose = () => {
    if (previews.ws !== ws) return;
    previews.ws = null;
    previews.screens = {};
    setTimeout(scheduleWatch, 1500); // reconnects if tiles are in view
  };
}

function closePreviews() {
  const ws = previews.ws;
  previews.ws = null;
  previews.screens = {};
  if (ws) ws.close();
}

// applyPreview takes one screen from the server: whole, or the rows that
// changed.
function applyPreview(u) {
  previews.stats.updates++;
  previews.stats.agents[u.agent] = (previews.stats.agents[u.agent] || 0) + 1;
  let s = previews.screens[u.agent];
  if (!u.live) s = { live: false, lines: [] };
  else if (u.full) s = { live: true, cols: u.cols, rows: u.rows, lines: u.lines || [] };
  else if (s) (u.at || []).forEach((i, k) => { s.lines[i] = u.lines[k]; });
  else return;
  previews.screens[u.agent] = s;
  const td = previews.visible.get(u.agent);
  if (td) drawPreview(td, s);
}

// drawPreview shows a screen's rows down to its last non-blank one; the
// tile shows the bottom of them (where a program's latest output is).
function drawPreview(td, s) {
  setAttr(td, 'data-live', s.live ? 'yes' : 'no');
  let n = s.lines.length;
  while (n > 0 && !s.lines[n - 1]) n--;
  setText(td.firstChild, s.lines.slice(0, n).join('\n'));
}

// ---- calls and results ----

function renderCalls() {
  const invs = state.invs;
  $('#invocationsempty').hidden = invs.length > 0;
  sync($('#invocations tbody'), invs, (i) => i.id, (i) => el('tr', { 'data-id': i.id },
    el('td', { class: 'who' }), el('td', {}, el('span', { class: 'pill' })), el('td', { class: 'task' }), el('td', { class: 'took' })),
  (tr, i) => {
    setAttr(tr, 'data-status', i.status);
    setText(tr.querySelector('.who'), `${agentName(i.caller_agent_id)} → ${agentName(i.callee_agent_id)}`);
    const pill = tr.querySelector('.pill');
    setText(pill, i.status.replace('_', ' '));
    pill.className = 'pill inv-' + i.status;
    setText(tr.querySelector('.task'), short(i.reason, 120) + (i.error ? ` — ${short(i.error, 120)}` : ''));
    const start = new Date(i.started_at || i.created_at).getTime();
    const end = i.completed_at ? new Date(i.completed_at).getTime() : Date.now();
    setText(tr.querySelector('.took'), duration(end - start) + (i.completed_at ? '' : ' so far'));
  });
}

function renderResults() {
  const rs = state.results;
  $('#resultsempty').hidden = rs.length > 0;
  sync($('#results tbody'), rs, (r) => r.id, (r) => el('tr', { 'data-id': r.id },
    el('td', {}, `${agentName(r.from_agent_id)} → ${agentName(r.to_agent_id)}`),
    el('td', {}, localTime(r.created_at)),
    el('td', {}, el('span', { class: 'meta' }, r.result_type + ': '), short(r.content, 200))));
}

// ---- history ----

// Bookkeeping: events that record the office's own progress, hidden
// unless asked for.
const bookkeeping = (k) => k.startsWith('transcript.') || ['message.delivered', 'question.delivered', 'result.delivered',
  'dependency.delivered', 'invocation.reminded', 'invocation.in_progress', 'session.busy', 'session.ready',
  // Told by the message events, which carry the text.
  'message.ask_user', 'invocation.created', 'result.created'].includes(k);

// describe turns an event into a sentence.
function describe(ev) {
  const who = agentName(ev.agent_id);
  const p = ev.payload || {};
  // A message event's payload is the message's fields, flattened.
  switch (ev.kind) {
    case 'message.ask_user': case 'message.user_question': return `${who} asked: ${short(p.question, 140)}`;
    case 'message.invoke': return `${who} asked ${p.target || 'another agent'} to: ${short(p.task, 120)}`;
    case 'message.deliver_result': return `${who} delivered a result to ${p.target || '?'}: ${short(p.content, 120)}`;
    case 'message.step': return `${who} is at step ${p.current}/${p.total}: ${p.name}`;
    case 'message.step_complete': return `${who} finished a step${p.name ? ': ' + p.name : ''}`;
    case 'message.phase_complete': return `${who} completed phase ${p.number}${p.name ? ': ' + p.name : ''}`;
    case 'message.error': return `${who} reported an error: ${short(p.message, 140)}`;
    case 'message.dependency_request': return `${who} needs ${p.name || 'a dependency'}`;
    case 'message.invalid': return `${who} wrote a message the office could not read: ${short(p.reason || p.raw, 120)}`;
    case 'question.created': return `${who} asked the people: ${short(p.question, 120)}`;
    case 'question.answered': return `a person answered ${who}'s question`;
    case 'question.expired': return `${who}'s question expired${p.default ? ` (default "${p.default}" used)` : ''}`;
    case 'question.answer_invalid': return `an answer to ${who} was refused: ${p.reason}`;
    case 'question.cancelled': return `${who}'s question "${short(p.question, 80)}" was cancelled: ${p.reason}`;
    case 'invocation.created': return `${p.caller} gave ${p.callee} a task`;
    case 'invocation.completed': return `${who}'s task was completed`;
    case 'invocation.failed': return `a task of ${who} failed: ${p.reason}`;
    case 'invocation.rejected': return `${who}'s call to ${p.target} was refused: ${p.reason}`;
    case 'result.created': return `${who} sent a result to ${p.to}`;
    case 'dependency.requested': return `${who} asked for ${p.type} ${p.name}`;
    case 'dependency.provided': return `a person provided ${p.name} to ${who}`;
    case 'dependency.rejected': return `a person refused ${who}'s dependency${p.reason ? ': ' + p.reason : ''}`;
    case 'permission.requested': return `${who} asks permission to use ${p.tool || 'a tool'}`;
    case 'permission.allowed': return `${who} was allowed to use ${p.tool || 'a tool'}`;
    case 'permission.denied': return `${who} was denied ${p.tool || 'a tool'} (${p.by || 'person'})`;
  }
  if (ev.kind.startsWith('session.')) {
    const st = ev.kind.slice(8);
    const why = p.detail ? ': ' + short(p.detail.split('\n')[0], 120) : '';
    return `${who} is ${statusLabel(st)}${why}`;
  }
  const rest = Object.entries(p).filter(([, v]) => typeof v !== 'object').map(([k, v]) => `${k}=${short(String(v), 40)}`).join(' ');
  return `${who}: ${ev.kind}${rest ? ' (' + rest + ')' : ''}`;
}

// track keeps what each agent is doing from the history: its last step
// and phase.
function track(ev) {
  if (!ev.agent_id) return;
  const a = (state.activity[ev.agent_id] = state.activity[ev.agent_id] || {});
  const p = ev.payload || {};
  if (ev.kind === 'message.step') a.step = `${p.current}/${p.total}: ${p.name}`;
  if (ev.kind === 'message.phase_complete') { a.phase = `${p.number} complete`; a.step = ''; }
  if (ev.kind === 'session.starting' || ev.kind === 'message.deliver_result') { a.step = ''; }
}

function eventShown(ev) {
  const agent = $('#evagent').value, kind = $('#evkind').value;
  if (!$('#evinternal').checked && bookkeeping(ev.kind)) return false;
  if (agent && ev.agent_id !== agent) return false;
  if (kind && ev.kind.split('.')[0] !== kind) return false;
  return true;
}

function eventItem(ev) {
  return el('li', { 'data-id': ev.id, 'data-kind': ev.kind, class: ev.kind.replace(/\./g, '-') },
    el('time', { datetime: ev.created_at }, localTime(ev.created_at)), ' ', describe(ev));
}

function renderEvents() {
  const list = $('#events');
  const shown = state.events.filter(eventShown).slice(-300);
  list.replaceChildren(...shown.map(eventItem));
  list.scrollTop = list.scrollHeight;
}

function renderAgentFilter() {
  sync($('#evagent'), [{ id: '', name: 'all agents' }, ...state.agents], (a) => a.id || '-',
    (a) => el('option', { value: a.id }, a.name), (o, a) => setText(o, a.name));
}

function addKind(kind) {
  const top = kind.split('.')[0];
  const sel = $('#evkind');
  if (![...sel.options].some((o) => o.value === top)) sel.append(el('option', { value: top }, top));
}

function openEvents() {
  if (state.es) state.es.close();
  const url = `/api/offices/${encodeURIComponent(state.office)}/events/stream?after_id=${state.lastEvent}`;
  const es = new EventSource(url);
  state.es = es;
  es.onopen = () => { setText($('#live'), 'live'); $('#live').className = 'pill on'; scheduleRefresh(); };
  es.onerror = () => { setText($('#live'), 'reconnecting'); $('#live').className = 'pill off'; };
  es.addEventListener('event', (msg) => {
    const ev = JSON.parse(msg.data);
    if (ev.id <= state.lastEvent) return;
    state.lastEvent = ev.id;
    state.events.push(ev);
    if (state.events.length > 3000) state.events.splice(0, state.events.length - 3000);
    track(ev);
    addKind(ev.kind);
    if (eventShown(ev)) state.newEvents.push(ev);
    // The history is drawn every 50 ms, however many events came: a
    // stream catching up on thousands of events (an office of 200 agents)
    // must not lay the page out once per event.
    if (!state.eventsFrame) state.eventsFrame = setTimeout(flushEvents, 50);
    if (applyEvent(ev)) { scheduleDraw(); return; }
    const rows = rowsOf(ev);
    if (rows) updateRows(rows); else scheduleRefresh(listsOf(ev.kind));
  });
}

// applyEvent takes what an event says about an agent into the page without
// a request: a session event is the agent's new status (from the session,
// with its detail), a step or phase is what it does. It reports whether
// the event was taken; any other event (a question, a call, a result, a
// new agent) has the lists read again.
function applyEvent(ev) {
  if (ev.kind.startsWith('transcript.') || ['message.step', 'message.step_complete', 'message.phase_complete'].includes(ev.kind)) return true;
  if (!ev.kind.startsWith('session.')) return false;
  // session.woken says for what a hibernated agent is started; its
  // status comes with session.starting.
  if (ev.kind === 'session.woken') return true;
  const a = agentById(ev.agent_id);
  if (!a) return false;
  const status = { session_status: ev.kind.slice(8), session_detail: (ev.payload && ev.payload.detail) || '', session_since: ev.created_at };
  state.pushed[a.id] = { status, at: performance.now() };
  Object.assign(a, status);
  return true;
}

// rowLists are the lists the page updates by the row: how one row is
// read, which rows the list keeps (pending questions and dependencies;
// the latest calls and results, up to max).
const rowLists = {
  questions: { path: (id) => `/api/questions/${id}`, keep: (r) => r.status === 'pending' },
  deps: { path: (id) => `/api/dependencies/${id}`, keep: (r) => r.status === 'pending' },
  invs: { path: (id) => `/api/invocations/${id}`, keep: () => true, max: 200 },
  results: { path: (id) => `/api/results/${id}`, keep: () => true, max: 100 },
};

// settledKinds are the events after which the question or dependency
// they name is no longer pending: it leaves its list with no request.
const settledKinds = new Set(['question.answered', 'question.expired', 'question.cancelled', 'question.delivered',
  'permission.allowed', 'permission.denied', 'permission.expired', 'permission.ended',
  'dependency.provided', 'dependency.rejected', 'dependency.delivered']);

// rowsOf names the rows an event changes, [{list, id, gone}] (none for an
// event no list shows: a message is followed by the event of the row it
// made), or undefined when the event names no row of the lists it changes
// (then those lists are read whole, listsOf).
function rowsOf(ev) {
  const p = ev.payload || {};
  const top = ev.kind.split('.')[0];
  const rows = [];
  const row = (list, id) => { if (id) rows.push({ list, id: String(id), gone: settledKinds.has(ev.kind) && rowLists[list].max === undefined }); };
  switch (top) {
    case 'question': case 'permission':
      row('questions', p.question_id); row('questions', p.new_question_id);
      // A permission decided by a rule asks nobody: no row.
      return rows.length || top === 'permission' ? rows : undefined;
    case 'dependency': row('deps', p.dependency_id); break;
    case 'invocation': row('invs', p.invocation_id); break;
    case 'result':
      if (ev.kind !== 'result.created') return [];
      row('results', p.result_id); row('invs', p.invocation_id);
      break;
    case 'message': case 'delivery': case 'transcript': return [];
    default: return undefined;
  }
  return rows.length ? rows : undefined;
}

// updateRows takes the rows an event changed into the lists: the rows
// are read by their id, together, 50 ms after the first (the events of one
// change come in a burst); a settled one leaves with no request, at once,
// or with the rows being read (a question asked again replaces the one it
// cancels in one step: the count does not drop to 0 between).
function updateRows(rows) {
  for (const r of rows) {
    const k = r.list + ' ' + r.id;
    if (r.gone) state.wantRows.delete(k);
    state.wantRows.set(k, r);
  }
  if (![...state.wantRows.values()].some((r) => !r.gone)) { settleRows(); return; }
  if (!state.rowTimer) state.rowTimer = setTimeout(readRows, 50);
}

// settleRows takes the settled rows out of their lists.
function settleRows() {
  let gone = false;
  for (const [k, r] of state.wantRows) if (r.gone) { setRow(r.list, r.id, null); state.wantRows.delete(k); gone = true; }
  if (gone) scheduleDraw();
}

async function readRows() {
  state.rowTimer = 0;
  const want = [...state.wantRows.values()].filter((r) => !r.gone);
  const gone = [...state.wantRows.values()].filter((r) => r.gone);
  state.wantRows.clear();
  const office = state.office;
  await Promise.all(want.map(async (r) => {
    let row = null;
    try {
      row = await api('GET', rowLists[r.list].path(encodeURIComponent(r.id)));
    } catch (e) {
      if (e.status !== 404) { scheduleRefresh([r.list]); return; } // read the list instead
    }
    if (state.office === office) setRow(r.list, r.id, row);
  }));
  if (state.office === office) for (const r of gone) setRow(r.list, r.id, null);
  scheduleDraw();
}

// setRow puts a row read by its id (null: gone) into its list, and keeps
// the change for a list read begun before it (refresh).
function setRow(list, id, row) {
  state[list] = placeRow(state[list], list, id, row);
  const now = performance.now();
  state.edits = state.edits.filter((e) => now - e.at < 60000);
  state.edits.push({ list, id, row, at: now });
}

// placeRow returns rows with the row of id replaced by row, or left out
// when row is null or not kept, in the lists' order (oldest first).
function placeRow(rows, list, id, row) {
  const spec = rowLists[list];
  const out = rows.filter((x) => x.id !== id);
  if (row && spec.keep(row)) {
    out.push(row);
    out.sort((a, b) => new Date(a.created_at) - new Date(b.created_at));
    if (spec.max && out.length > spec.max) out.splice(0, out.length - spec.max);
  }
  return out;
}

// listsOf names the lists an event changes; none for an event no list
// shows, all of them for one the page does not know.
function listsOf(kind) {
  const top = kind.split('.')[0];
  if (top === 'question' || top === 'permission') return ['questions'];
  if (top === 'dependency') return ['deps'];
  if (top === 'invocation') return ['invs'];
  if (top === 'delivery') return []; // the office typing a message into a terminal
  if (top === 'result') return ['results', 'invs'];
  if (top === 'message') {
    return { 'message.ask_user': ['questions'], 'message.user_question': ['questions'], 'message.invoke': ['invs'],
      'message.deliver_result': ['results', 'invs'], 'message.dependency_request': ['deps'] }[kind] || [];
  }
  return undefined;
}

// scheduleDraw draws the lists from what the page holds, once per frame
// however many events came.
function scheduleDraw() {
  if (state.drawFrame) return;
  state.drawFrame = setTimeout(() => { state.drawFrame = 0; liveStatus(state.agents); render(); }, 16);
}

function flushEvents() {
  state.eventsFrame = 0;
  const evs = state.newEvents.splice(0).slice(-300);
  if (!evs.length) return;
  const list = $('#events');
  const end = list.scrollHeight - list.scrollTop - list.clientHeight < 30;
  list.append(...evs.map(eventItem));
  while (list.children.length > 300) list.firstChild.remove();
  if (end) list.scrollTop = list.scrollHeight;
}

// ---- terminal ----

// The terminal's font: 13 px, drawn scaled to the pane's width but never
// below minFont px (readable); a terminal wider than that scrolls
// sideways, its columns are never cut.
const termFont = 13;
const minFont = 10;
const minScale = minFont / termFont;

// openTerms lists the open terminal views: the main one and the pinned
// previews.
const openTerms = () => [...(state.term ? [state.term] : []), ...Object.values(state.minis)];

// TermView shows one agent's terminal. It is drawn at the session's own
// columns and rows (from the server's STATUS frames), never re-wrapped,
// and scaled to the pane's width (scale). Only the viewer in control
// resizes the session, and only when it asked to fit the session to its
// window (Take control and fit): then also when its window changes.
class TermView {
  constructor(agent) {
    this.agent = agent;
    this.control = 'none';
    this.pending = 0;
    this.paused = false;
    this.closed = false;
    this.fit = false; // resize the session to the pane while in control
    this.decoder = new TextDecoder();
    // #plain=1 in the address forces the plain view (as without xterm.js).
    const plain = new URLSearchParams(location.hash.slice(1)).has('plain');
    if (window.Terminal && !plain) {
      $('#termpane').hidden = false; $('#plain').hidden = true; $('#plaininput').hidden = true;
      this.xterm = new window.Terminal({ cols: agent.cols || 80, rows: agent.rows || 24, convertEol: false, scrollback: 5000, fontSize: termFont });
      $('#term').replaceChildren();
      this.xterm.open($('#term'));
      this.xterm.onData((d) => this.send(F.INPUT, new TextEncoder().encode(d)));
      this.xterm.onTitleChange((title) => { this.title = title; setAttr($('#termtitle'), 'title', title); setText($('#termtitle'), title ? `${agent.name} — ${title}` : agent.name); });
      this.onWinResize = () => { this.scale(); this.fitControl(); };
      window.addEventListener('resize', this.onWinResize);
      this.scale();
    } else {
      // xterm.js not installed (scripts/setup.sh copies it): plain text view.
      $('#termpane').hidden = true; $('#plain').hidden = false; $('#plaininput').hidden = false;
      $('#plain').textContent = '';
    }
    this.connect();
  }

  connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/ws/offices/${encodeURIComponent(state.office)}/agents/${this.agent.id}`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.connects = (this.connects || 0) + 1;
    this.title = '';
    if (this.xterm) this.xterm.reset(); else $('#plain').textContent = '';
    ws.onmessage = (m) => this.onFrame(new Uint8Array(m.data));
    ws.onclose = (e) => {
      this.setControl('none');
      this.st = null; // the agents list is the status source again
      if (this.closed) return;
      setText($('#termstatus'), `disconnected${e.reason ? ': ' + e.reason : ''}; reconnecting`);
      setTimeout(() => { if (!this.closed) this.connect(); }, 1500);
    };
  }

  onFrame(b) {
    const body = b.subarray(1);
    switch (b[0]) {
      case F.OUTPUT: this.output(body); break;
      case F.RESET:
        // The server skipped ahead (we fell behind): a fresh replay follows.
        if (this.xterm) this.xterm.reset(); else $('#plain').textContent = '';
        break;
      case F.STATUS: this.status(JSON.parse(new TextDecoder().decode(body))); break;
    }
  }

  output(body) {
    if (!this.xterm) {
      const pre = $('#plain');
      const text = this.decoder.decode(body, { stream: true })
        .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, '').replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
        .replace(/\x1b[@-_]/g, '').replace(/\r(?!\n)/g, '');
      pre.textContent = (pre.textContent + text).slice(-200000);
      pre.scrollTop = pre.scrollHeight;
      return;
    }
    // Flow control: pause the server while xterm has much unparsed.
    this.pending += body.length;
    this.xterm.write(body, () => {
      this.pending -= body.length;
      if (this.paused && this.pending < 128 * 1024) { this.paused = false; this.send(F.RESUME); }
    });
    if (!this.paused && this.pending > 1024 * 1024) { this.paused = true; this.send(F.PAUSE); }
  }

  status(st) {
    const was = this.control;
    this.setControl(st.control);
    termStatus(this, st);
    if (st.note) note(st.note);
    if (this.xterm && st.cols > 0 && st.rows > 0 && (st.cols !== this.xterm.cols || st.rows !== this.xterm.rows)) {
      // In order with the output: what came before is drawn at the old size.
      this.xterm.write('', () => { this.xterm.resize(st.cols, st.rows); this.scale(); });
    }
    if (st.control === 'you' && was !== 'you') this.fitControl();
  }

  // scale fits the terminal, drawn at the session's size, to the pane's
  // width: scaled down, but not below what can be read (minScale); past
  // that the pane scrolls sideways. Rows below the pane scroll too: the
  // width decides (a person reads lines).
  scale() {
    if (!this.xterm) return;
    const screen = $('#term .xterm-screen');
    const pane = $('#termpane');
    if (!screen) return;
    const w = screen.offsetWidth + 8, h = screen.offsetHeight + 8;
    const s = Math.max(minScale, Math.min(1, (pane.clientWidth - 1) / w));
    $('#term').style.transform = s < 1 ? `scale(${s})` : '';
    $('#term').dataset.scale = s.toFixed(3);
    const sizer = $('#termsizer');
    sizer.style.width = `${Math.ceil(w * s)}px`;
    sizer.style.height = `${Math.ceil(h * s)}px`;
  }

  // fitControl resizes the session to what fits the pane unscaled, when
  // this viewer has control.
  fitControl() {
    if (!this.xterm || this.control !== 'you' || !this.fit) return;
    clearTimeout(this.fitTimer);
    this.fitTimer = setTimeout(() => {
      const screen = $('#term .xterm-screen');
      const pane = $('#termpane');
      if (!screen || !this.xterm.cols) return;
      const cw = screen.offsetWidth / this.xterm.cols, ch = screen.offsetHeight / this.xterm.rows;
      const cols = Math.max(20, Math.floor((pane.clientWidth - 12) / cw));
      const rows = Math.max(5, Math.floor((pane.clientHeight - 12) / ch));
      if (cols !== this.xterm.cols || rows !== this.xterm.rows) this.resize(cols, rows);
    }, 100);
  }

  setControl(c) {
    this.control = c;
    $('#take').disabled = c === 'you';
    $('#takefit').disabled = !this.xterm || (c === 'you' && this.fit);
    $('#release').disabled = c !== 'you';
    document.body.dataset.control = c;
    if (c === 'you') note('');
  }

  send(type, payload) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    if ((type === F.INPUT || type === F.RESIZE) && this.control !== 'you') {
      if (type === F.INPUT) note('read-only: take control to type');
      return;
    }
    const p = payload || new Uint8Array(0);
    // The server closes on frames over 64 KiB: send big pastes in pieces.
    const max = 32 * 1024;
    for (let off = 0; off === 0 || off < p.length; off += max) {
      const part = p.subarray(off, off + max);
      const frame = new Uint8Array(part.length + 1);
      frame[0] = type;
      frame.set(part, 1);
      this.ws.send(frame);
    }
  }

  resize(cols, rows) { this.send(F.RESIZE, new TextEncoder().encode(JSON.stringify({ cols, rows }))); }

  // text is the whole buffer (scrollback and screen).
  text() {
    if (!this.xterm) return $('#plain').textContent;
    const buf = this.xterm.buffer.active;
    const lines = [];
    for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i).translateToString(true));
    return lines.join('\n');
  }

  // screen is what the page shows of the terminal: the rendered rows, as
  // drawn (spaces at the end of a row dropped).
  screen() {
    const rows = document.querySelectorAll('#term .xterm-rows > div');
    if (!rows.length) return '';
    return [...rows].map((r) => r.textContent.replace(/\u00a0/g, ' ').replace(/\s+$/, '')).join('\n');
  }

  close() {
    this.closed = true;
    clearTimeout(this.fitTimer);
    if (this.ws) this.ws.close();
    if (this.xterm) this.xterm.dispose();
    if (this.onWinResize) window.removeEventListener('resize', this.onWinResize);
  }
}

// MiniTerm is a pinned terminal: a read-only preview of an agent's
// terminal beside the main one, drawn at the session's size and scaled to
// its box (no minimum: it is a preview; click its name to open it large).
class MiniTerm {
  constructor(agent) {
    this.agent = agent;
    this.closed = false;
    this.control = 'none';
    this.box = el('div', { class: 'mini', 'data-name': agent.name, 'data-id': agent.id },
      el('div', { class: 'minibar' },
        el('a', { href: '#', class: 'open', onclick: (ev) => { ev.preventDefault(); openTerminal(agentById(agent.id) || agent); } }, agent.name),
        el('span', { class: 'ministatus meta' }),
        el('button', { type: 'button', class: 'unpin', title: 'unpin', onclick: () => unpin(agent.id) }, '×')),
      el('div', { class: 'minipane' }, el('div', { class: 'miniterm' })));
    $('#minis').append(this.box);
    $('#minis').hidden = false;
    this.xterm = new window.Terminal({ cols: agent.cols || 80, rows: agent.rows || 24, fontSize: termFont, scrollback: 0, disableStdin: true, cursorBlink: false });
    this.xterm.open(this.box.querySelector('.miniterm'));
    this.connect();
  }

  connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/ws/offices/${encodeURIComponent(state.office)}/agents/${this.agent.id}`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.xterm.reset();
    ws.onmessage = (m) => {
      const b = new Uint8Array(m.data), body = b.subarray(1);
      if (b[0] === F.OUTPUT) this.xterm.write(body);
      else if (b[0] === F.RESET) this.xterm.reset();
      else if (b[0] === F.STATUS) {
        const st = JSON.parse(new TextDecoder().decode(body));
        setText(this.box.querySelector('.ministatus'), `${statusLabel(st.session)} · ${st.cols}×${st.rows}`);
        if (st.cols > 0 && st.rows > 0 && (st.cols !== this.xterm.cols || st.rows !== this.xterm.rows)) {
          this.xterm.write('', () => { this.xterm.resize(st.cols, st.rows); this.scale(); });
        } else this.scale();
      }
    };
    ws.onclose = () => { if (!this.closed) setTimeout(() => { if (!this.closed) this.connect(); }, 1500); };
  }

  scale() {
    const screen = this.box.querySelector('.xterm-screen');
    const pane = this.box.querySelector('.minipane');
    if (!screen) return;
    const s = Math.min(1, pane.clientWidth / (screen.offsetWidth + 4));
    const t = this.box.querySelector('.miniterm');
    t.style.transform = `scale(${s})`;
    pane.style.height = `${Math.ceil((screen.offsetHeight + 4) * s)}px`;
  }

  fitControl() {}

  send() {}

  // screen is what the preview shows, row by row.
  screen() {
    return [...this.box.querySelectorAll('.xterm-rows > div')].map((r) => r.textContent.replace(/\u00a0/g, ' ').replace(/\s+$/, '')).join('\n');
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
    this.xterm.dispose();
    this.box.remove();
    $('#minis').hidden = !Object.keys(state.minis).length;
  }
}

// pin keeps the open terminal's agent as a preview beside the main one.
function pin() {
  const t = state.term;
  if (!t || !window.Terminal || state.minis[t.agent.id]) return;
  state.minis[t.agent.id] = new MiniTerm(t.agent);
}

// peek shows an agent's terminal as a small live preview beside the open
// one without opening it (a tile's "peek"); a second peek takes it away.
function peek(a) {
  if (!window.Terminal) return;
  if (state.minis[a.id]) unpin(a.id); else state.minis[a.id] = new MiniTerm(a);
}

function unpin(id) {
  const m = state.minis[id];
  if (!m) return;
  delete state.minis[id];
  m.close();
}

function openTerminal(agent) {
  if (state.term) state.term.close();
  setText($('#termtitle'), agent.name);
  document.body.dataset.terminal = agent.name;
  state.term = new TermView(agent);
  if (state.term.xterm) state.term.xterm.focus();
}

// For the browser tests: the open terminal's whole text, what its screen
// shows, and its size.
window.consoleText = () => (state.term ? state.term.text() : '');
window.consoleScreen = () => (state.term ? state.term.screen() : '');
// What the pinned preview of an agent shows.
window.consolePinned = (name) => {
  const m = Object.values(state.minis).find((x) => x.agent.name === name);
  return m ? m.screen() : null;
};
// What an agent's tile preview shows (null: none drawn), the agents the
// page watches, and what the preview socket brought.
window.consolePreview = (name) => {
  const a = state.agents.find((x) => x.name === name);
  const td = a && document.querySelector(`#agents td.preview[data-id="${a.id}"]`);
  return td && td.dataset.live ? td.firstChild.textContent : null;
};
window.consoleWatched = () => (previews.watching === null ? null : previews.watching.split(' ').filter(Boolean).map(agentName));
window.consolePreviewStats = () => ({ ...previews.stats, open: !!previews.ws && previews.ws.readyState === WebSocket.OPEN });
window.consoleSize = () => (state.term && state.term.xterm ? [state.term.xterm.cols, state.term.xterm.rows] : [0, 0]);
// The terminal's state beyond its text: modes, title, connections made,
// the drawn scale and whether any column is out of reach.
window.consoleState = () => {
  const t = state.term;
  if (!t || !t.xterm) return null;
  const m = t.xterm.modes, pane = $('#termpane'), sizer = $('#termsizer');
  return {
    alt: t.xterm.buffer.active.type === 'alternate', bracketed: m.bracketedPasteMode, appCursor: m.applicationCursorKeysMode,
    mouse: m.mouseTrackingMode, title: t.title || '', connects: t.connects, scale: Number($('#term').dataset.scale || 1),
    font: t.xterm.options.fontSize * Number($('#term').dataset.scale || 1),
    // every column can be scrolled to: the pane's scroll width covers the scaled terminal
    reach: pane.scrollWidth >= sizer.offsetWidth && sizer.offsetWidth >= Math.floor($('#term .xterm-screen').offsetWidth * Number($('#term').dataset.scale || 1)),
    paneWidth: pane.clientWidth, termWidth: sizer.offsetWidth,
  };
};
// consoleCell(x, y) is a cell of the visible screen: its text, colours
// (palette index, or -1 for the default) and bold.
window.consoleCell = (x, y) => {
  const t = state.term;
  const buf = t.xterm.buffer.active;
  const c = buf.getLine(buf.viewportY + y).getCell(x);
  const col = (isDef, isPal, v) => (isDef ? -1 : isPal ? v : 1000 + v);
  return { chars: c.getChars(), fg: col(c.isFgDefault(), c.isFgPalette(), c.getFgColor()), bg: col(c.isBgDefault(), c.isBgPalette(), c.getBgColor()), bold: !!c.isBold(), inverse: !!c.isInverse() };
};

// Take control keeps the agent's size (its layout does not change for
// anyone); Take control and fit resizes the agent to this window.
$('#take').addEventListener('click', () => { if (state.term) { state.term.fit = false; state.term.send(F.TAKE); } });
$('#takefit').addEventListener('click', () => {
  const t = state.term;
  if (!t) return;
  t.fit = true;
  if (t.control === 'you') t.fitControl(); else t.send(F.TAKE);
});
$('#release').addEventListener('click', () => { if (state.term) { state.term.fit = false; state.term.send(F.RELEASE); } });
$('#plaininput').addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (!state.term) return;
  state.term.send(F.INPUT, new TextEncoder().encode($('#plainline').value + '\r'));
  $('#plainline').value = '';
});
$('#message').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const content = $('#msgtext').value;
  if (!content.trim()) return;
  try {
    await api('POST', `/api/offices/${encodeURIComponent(state.office)}/messages`, { agent: $('#msgagent').value, content });
    $('#msgtext').value = '';
    setText($('#messageerror'), '');
  } catch (e) { setText($('#messageerror'), 'message: ' + e.message); }
});
$('#wide').addEventListener('click', () => toggleWide());
$('#pin').addEventListener('click', () => pin());
window.addEventListener('resize', () => Object.values(state.minis).forEach((m) => m.scale()));
for (const b of document.querySelectorAll('#agentfilter button[data-filter]')) {
  b.dataset.label = b.textContent;
  b.addEventListener('click', () => { state.agentFilter = b.dataset.filter; renderAgents(); });
}
function toggleWide() {
  document.body.dataset.wide = document.body.dataset.wide === 'yes' ? '' : 'yes';
  for (const t of openTerms()) { t.scale(); t.fitControl(); }
}
// Keyboard shortcuts, outside text fields and the terminal: n the next
// thing that needs you (its first answer focused), o open its agent's
// terminal, w the terminal wide (the lists hidden), p pin the open
// terminal as a preview beside the next one opened.
document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.target.closest('input, textarea, select, #term')) return;
  const cards = [...document.querySelectorAll('#needlist .card:not(.done)')];
  if (ev.key === 'n' && cards.length) {
    const cur = cards.indexOf(document.activeElement && document.activeElement.closest('.card'));
    const card = cards[(cur + 1) % cards.length];
    card.scrollIntoView({ block: 'nearest' });
    const b = card.querySelector('button.choice, button.option, button.allow, input, button');
    if (b) b.focus();
    ev.preventDefault();
  } else if (ev.key === 'o') {
    const card = document.activeElement && document.activeElement.closest('.card');
    const id = card && (card.dataset.agentId || (card.classList.contains('agent') && card.dataset.id));
    const a = id && agentById(id);
    if (a) { openTerminal(a); ev.preventDefault(); }
  } else if (ev.key === 'w') { toggleWide(); ev.preventDefault(); } else if (ev.key === 'p') { pin(); ev.preventDefault(); }
});
// The agents as a compact grid of tiles (the default) or as a table.
function setLayout(layout) {
  $('#agents').classList.toggle('grid', layout !== 'table');
  // (a table hides the previews: their tiles leave view, the page stops watching them)
  setText($('#layout'), layout === 'table' ? 'grid' : 'table');
  try { localStorage.setItem('office.layout', layout); } catch { /* private window */ }
}
$('#layout').addEventListener('click', () => setLayout($('#agents').classList.contains('grid') ? 'table' : 'grid'));
setLayout((() => { try { return localStorage.getItem('office.layout'); } catch { return null; } })() || 'grid');
// Previews on or off (a denser grid without them); remembered.
function setPreviews(on) {
  $('#agents').classList.toggle('nopreviews', !on);
  $('#previews').classList.toggle('on', on);
  try { localStorage.setItem('office.previews', on ? 'on' : 'off'); } catch { /* private window */ }
}
$('#previews').addEventListener('click', () => setPreviews($('#agents').classList.contains('nopreviews')));
setPreviews((() => { try { return localStorage.getItem('office.previews'); } catch { return null; } })() !== 'off');
$('#office').addEventListener('change', (ev) => selectOffice(ev.target.value));
for (const id of ['#evagent', '#evkind', '#evinternal']) $(id).addEventListener('change', renderEvents);
// Everything that changes is an event on the stream (a status change, a
// question, a call…): a status change is drawn from the event itself, any
// other change has the lists read once. The page does not poll: a stream
// that reconnects resumes after the last event it had (after_id) and reads
// the lists again. Durations ("for 12s") are counted here, every second,
// with no request.
setInterval(tickDurations, 1000);
loadOffices().catch((e) => note('load: ' + e.message));
// Every script of the page has run (tests wait for it before clicking a
// form whose handler another script adds).
window.addEventListener('load', () => { document.body.dataset.ready = 'yes'; });
