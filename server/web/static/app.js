// The office console: overview of one office (agents, pending questions,
// dependency requests, invocations, events) kept live by the SSE event
// stream, and a terminal view of any agent over the console WebSocket
// (framing documented in server/console.go). The admin token travels as an
// HttpOnly cookie set when the page was opened with ?token=.
'use strict';

const F = { OUTPUT: 1, INPUT: 2, RESIZE: 3, PAUSE: 4, RESUME: 5, TAKE: 6, RELEASE: 7, STATUS: 8, RESET: 9 };
const $ = (sel) => document.querySelector(sel);
const state = { office: null, agents: [], permissions: [], events: null, lastEvent: 0, refreshTimer: null, term: null };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
  const res = await fetch(path, opts);
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error((data && data.error && data.error.message) || res.statusText);
  return data;
}

function note(msg) { $('#note').textContent = msg || ''; }

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
  state.office = id;
  state.lastEvent = 0;
  $('#events').replaceChildren();
  await refresh(); // agents first, so events show names
  openEvents();
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = null; refresh(); }, 150);
}

async function refresh() {
  const o = encodeURIComponent(state.office);
  try {
    const [agents, questions, deps, invs] = await Promise.all([
      api('GET', `/api/offices/${o}/agents`),
      api('GET', `/api/offices/${o}/questions?status=pending`),
      api('GET', `/api/offices/${o}/dependencies?status=pending`),
      api('GET', `/api/offices/${o}/invocations?limit=50`),
    ]);
    state.agents = agents;
    // Permission requests (category permission) are answered in "Needs
    // you", at the top; the other questions in their own list.
    state.permissions = questions.filter((q) => q.category === 'permission');
    renderAgents(agents);
    renderPermissions(state.permissions);
    renderQuestions(questions.filter((q) => q.category !== 'permission'));
    renderDependencies(deps);
    renderInvocations(invs);
  } catch (e) { note('refresh: ' + e.message); }
}

const agentName = (id) => (state.agents.find((a) => a.id === id) || { name: id ? id.slice(0, 8) : '?' }).name;

function renderAgents(agents) {
  const rows = agents.map((a) => el('tr', { class: 'agent', 'data-name': a.name, 'data-id': a.id },
    el('td', {}, el('a', { href: '#', class: 'open', onclick: (ev) => { ev.preventDefault(); openTerminal(a); } }, a.name)),
    el('td', {}, a.role || ''),
    el('td', {}, el('span', { class: 'pill ' + a.session_status }, a.session_status),
      a.session_detail ? el('div', { class: 'detail short', title: a.session_detail }, a.session_detail.split('\n')[0].slice(0, 80)) : null),
    el('td', {},
      el('button', { class: 'start', onclick: () => act(a, 'start') }, 'start'), ' ',
      el('button', { class: 'stop', onclick: () => act(a, 'stop') }, 'stop'), ' ',
      el('button', { class: 'restart', onclick: () => act(a, 'restart') }, 'restart'))));
  $('#agents tbody').replaceChildren(...rows);
  renderAttention(agents);
  const sel = $('#msgagent');
  const cur = sel.value;
  sel.replaceChildren(...agents.map((a) => el('option', { value: a.id }, a.name)));
  if (agents.some((a) => a.id === cur)) sel.value = cur;
}

// renderAttention lists the agents whose terminal waits for a person (a
// dialog or a permission prompt) or whose process ended badly, with the
// reason the server gives, above everything else: open the terminal, take
// control and answer the dialog there.
function renderAttention(agents) {
  const need = agents.filter((a) => ['needs_attention', 'crashed', 'failed'].includes(a.session_status));
  const who = new Set([...need.map((a) => a.id), ...state.permissions.map((q) => q.agent_id)]);
  $('#attention').hidden = who.size === 0;
  $('#attentionlist').replaceChildren(...need.map((a) => el('div', { class: 'card attention', 'data-name': a.name },
    el('div', { class: 'meta' }, `${a.name}: `, el('span', { class: 'pill ' + a.session_status }, a.session_status), ' ',
      el('button', { type: 'button', class: 'open', onclick: () => openTerminal(a) }, 'open terminal')),
    el('pre', { class: 'detail' }, a.session_detail || ''))));
  document.title = who.size ? `(${who.size}) Office console` : 'Office console';
}

// renderPermissions shows the agents' pending tool-permission requests at
// the top, with the buttons that answer them: the answer goes back to the
// agent as the decision (a deny with the reason typed here). Cards already
// shown are kept as they are, so a refresh never loses a reason being typed.
function renderPermissions(qs) {
  const list = $('#permissionlist');
  const ids = new Set(qs.map((q) => q.id));
  const shown = new Set();
  for (const c of [...list.children]) {
    if (ids.has(c.dataset.id)) shown.add(c.dataset.id); else c.remove();
  }
  for (const q of qs) if (!shown.has(q.id)) list.append(permissionCard(q));
  renderAttention(state.agents);
}

function permissionCard(q) {
  const reason = el('input', { class: 'reason', name: 'reason', placeholder: 'reason (told to the agent with a deny)', autocomplete: 'off' });
  const send = async (text) => {
    try { await api('POST', `/api/questions/${q.id}/answer`, { response: text }); note(''); }
    catch (e) { note('permission: ' + e.message); }
    scheduleRefresh();
  };
  const expires = q.expires_at ? new Date(q.expires_at).toLocaleTimeString() : '';
  return el('div', { class: 'card attention permission', 'data-id': q.id, 'data-agent': agentName(q.agent_id) },
    el('div', { class: 'meta' }, `Permission request from ${agentName(q.agent_id)}`, expires ? ` · denied at ${expires} if nobody answers` : ''),
    el('div', { class: 'text' }, q.question),
    q.context ? el('pre', { class: 'detail' }, q.context) : null,
    el('div', {},
      el('button', { type: 'button', class: 'allow', onclick: () => send('allow once') }, 'Allow once'), ' ',
      el('button', { type: 'button', class: 'allow-session', onclick: () => send('allow for this session') }, 'Allow for this session'), ' ',
      reason, ' ',
      el('button', { type: 'button', class: 'deny', onclick: () => send(reason.value.trim() ? 'deny: ' + reason.value.trim() : 'deny') }, 'Deny')));
}

async function act(a, action) {
  try { await api('POST', `/api/offices/${encodeURIComponent(state.office)}/agents/${a.id}/${action}`); note(''); }
  catch (e) { note(`${action} ${a.name}: ${e.message}`); }
  scheduleRefresh();
}

function renderQuestions(qs) {
  const box = $('#questions');
  if (!qs.length) { box.replaceChildren(el('p', { class: 'empty' }, 'none')); return; }
  box.replaceChildren(...qs.map((q) => {
    const input = el('input', { class: 'answer', name: 'answer', placeholder: q.default_answer || 'your answer', autocomplete: 'off' });
    const send = async (text) => {
      try { await api('POST', `/api/questions/${q.id}/answer`, { response: text }); note(''); }
      catch (e) { note('answer: ' + e.message); }
      scheduleRefresh();
    };
    const opts = (q.options || []).map((o) => el('button', { type: 'button', class: 'option', onclick: () => send(o) }, o));
    return el('form', { class: 'card question', 'data-id': q.id, onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) send(input.value); } },
      el('div', { class: 'meta' }, `${agentName(q.agent_id)} asks (${q.question_type})`),
      el('div', { class: 'text' }, q.question),
      q.context ? el('div', { class: 'meta' }, q.context) : null,
      el('div', {}, ...opts),
      el('div', {}, input, ' ', el('button', { class: 'answer-submit' }, 'Answer')));
  }));
}

function renderDependencies(ds) {
  const box = $('#dependencies');
  if (!ds.length) { box.replaceChildren(el('p', { class: 'empty' }, 'none')); return; }
  box.replaceChildren(...ds.map((d) => {
    const value = el('input', { class: 'value', type: d.type === 'api_key' ? 'password' : 'text', placeholder: d.default || 'value', autocomplete: 'off' });
    const reason = el('input', { class: 'reason', placeholder: 'reason to reject' });
    const call = async (what, body) => {
      try { await api('POST', `/api/dependencies/${d.id}/${what}`, body); note(''); }
      catch (e) { note(what + ': ' + e.message); }
      scheduleRefresh();
    };
    return el('div', { class: 'card dependency', 'data-id': d.id },
      el('div', { class: 'meta' }, `${agentName(d.agent_id)} needs ${d.type} ${d.required ? '(required)' : '(optional)'}`),
      el('div', {}, el('strong', {}, d.name), d.description ? ' — ' + d.description : ''),
      el('div', {}, value, ' ', el('button', { class: 'provide', onclick: () => call('provide', { value: value.value }) }, 'Provide')),
      el('div', {}, reason, ' ', el('button', { class: 'reject', onclick: () => call('reject', { reason: reason.value }) }, 'Reject')));
  }));
}

function renderInvocations(invs) {
  $('#invocations tbody').replaceChildren(...invs.map((i) => el('tr', {},
    el('td', {}, `${agentName(i.caller_agent_id)} → ${agentName(i.callee_agent_id)}`),
    el('td', {}, el('span', { class: 'pill' }, i.status)),
    el('td', {}, (i.reason || '').slice(0, 120)))));
}

function openEvents() {
  if (state.events) state.events.close();
  const url = `/api/offices/${encodeURIComponent(state.office)}/events/stream?after_id=${state.lastEvent}`;
  const es = new EventSource(url);
  state.events = es;
  es.onopen = () => { $('#live').textContent = 'live'; $('#live').className = 'pill on'; };
  es.onerror = () => { $('#live').textContent = 'reconnecting'; $('#live').className = 'pill off'; };
  es.addEventListener('event', (m) => {
    const ev = JSON.parse(m.data);
    state.lastEvent = ev.id;
    const list = $('#events');
    list.append(el('li', { value: ev.id }, `${ev.kind} ${ev.agent_id ? agentName(ev.agent_id) : ''} ${ev.payload ? JSON.stringify(ev.payload).slice(0, 160) : ''}`));
    while (list.children.length > 200) list.firstChild.remove();
    list.scrollTop = list.scrollHeight;
    scheduleRefresh();
  });
}

// ---- terminal ----

class TermView {
  constructor(agent) {
    this.agent = agent;
    this.control = 'none';
    this.pending = 0;
    this.paused = false;
    this.closed = false;
    this.decoder = new TextDecoder();
    // #plain=1 in the address forces the plain view (as without xterm.js).
    const plain = new URLSearchParams(location.hash.slice(1)).has('plain');
    if (window.Terminal && !plain) {
      $('#term').hidden = false; $('#plain').hidden = true; $('#plaininput').hidden = true;
      this.xterm = new window.Terminal({ convertEol: false, scrollback: 5000, fontSize: 13 });
      if (window.FitAddon) { this.fit = new window.FitAddon.FitAddon(); this.xterm.loadAddon(this.fit); }
      $('#term').replaceChildren();
      this.xterm.open($('#term'));
      if (this.fit) this.fit.fit();
      this.xterm.onData((d) => this.send(F.INPUT, new TextEncoder().encode(d)));
      this.xterm.onResize(({ cols, rows }) => this.resize(cols, rows));
      this.onWinResize = () => this.fit && this.fit.fit();
      window.addEventListener('resize', this.onWinResize);
    } else {
      // xterm.js not installed (scripts/setup.sh copies it): plain text view.
      $('#term').hidden = true; $('#plain').hidden = false; $('#plaininput').hidden = false;
      $('#plain').textContent = '';
    }
    this.connect();
  }

  connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/ws/offices/${encodeURIComponent(state.office)}/agents/${this.agent.id}`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    if (this.xterm) this.xterm.reset(); else $('#plain').textContent = '';
    ws.onmessage = (m) => this.onFrame(new Uint8Array(m.data));
    ws.onclose = (e) => {
      this.setControl('none');
      if (this.closed) return;
      note(`terminal closed${e.reason ? ': ' + e.reason : ''}; reconnecting`);
      setTimeout(() => { if (!this.closed) this.connect(); }, 1500);
    };
  }

  onFrame(b) {
    const body = b.subarray(1);
    switch (b[0]) {
      case F.OUTPUT:
        if (this.xterm) {
          // Flow control: pause the server while xterm has much unparsed.
          this.pending += body.length;
          this.xterm.write(body, () => {
            this.pending -= body.length;
            if (this.paused && this.pending < 128 * 1024) { this.paused = false; this.send(F.RESUME); }
          });
          if (!this.paused && this.pending > 1024 * 1024) { this.paused = true; this.send(F.PAUSE); }
        } else {
          const pre = $('#plain');
          const text = this.decoder.decode(body, { stream: true })
            .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, '').replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
            .replace(/\x1b[@-_]/g, '').replace(/\r(?!\n)/g, '');
          pre.textContent = (pre.textContent + text).slice(-200000);
          pre.scrollTop = pre.scrollHeight;
        }
        break;
      case F.RESET:
        // The server skipped ahead (we fell behind): a fresh replay follows.
        if (this.xterm) this.xterm.reset(); else $('#plain').textContent = '';
        break;
      case F.STATUS: {
        const st = JSON.parse(new TextDecoder().decode(body));
        this.setControl(st.control);
        $('#termstatus').textContent = `${st.session} · ${st.viewers} viewer(s) · control: ${st.control}`;
        if (st.note) note(st.note);
        if (st.control === 'you' && this.xterm) this.resize(this.xterm.cols, this.xterm.rows);
        break;
      }
    }
  }

  setControl(c) {
    this.control = c;
    $('#take').disabled = c === 'you';
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

  text() {
    if (!this.xterm) return $('#plain').textContent;
    const buf = this.xterm.buffer.active;
    const lines = [];
    for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i).translateToString(true));
    return lines.join('\n');
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
    if (this.xterm) this.xterm.dispose();
    if (this.onWinResize) window.removeEventListener('resize', this.onWinResize);
  }
}

function openTerminal(agent) {
  if (state.term) state.term.close();
  $('#termtitle').textContent = agent.name;
  document.body.dataset.terminal = agent.name;
  state.term = new TermView(agent);
  if (state.term.xterm) state.term.xterm.focus();
}

// consoleText returns what the open terminal shows (used by the browser test).
window.consoleText = () => (state.term ? state.term.text() : '');

$('#take').addEventListener('click', () => state.term && state.term.send(F.TAKE));
$('#release').addEventListener('click', () => state.term && state.term.send(F.RELEASE));
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
    note('');
  } catch (e) { note('message: ' + e.message); }
});
$('#office').addEventListener('change', (ev) => selectOffice(ev.target.value));
setInterval(() => state.office && refresh(), 3000);
loadOffices().catch((e) => note('load: ' + e.message));
