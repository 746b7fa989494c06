// The reference web office (docs/frontend.md): every read and write is a
// supabase-js call under the member's token; the database's grants, row
// security and functions decide what they may do. Data is put in the page
// with textContent only.
'use strict'

const $ = (id) => document.getElementById(id)
const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v
    else if (k.startsWith('data-')) e.setAttribute(k, v)
    else e[k] = v
  }
  for (const c of children) e.append(c)
  return e
}
const pill = (s) => el('span', { class: `pill ${s}` }, s)
const fail = (box, error) => { box.textContent = error ? `${error.code ?? ''} ${error.message}${error.hint ? ` (${error.hint})` : ''}`.trim() : '' }

let sb = null       // the supabase-js client
let office = null   // the office shown
let channel = null  // its one Realtime channel
let names = {}      // agent id → name
let member = null   // { token, server }: for the office server's member endpoint

// signIn makes the client with the member's access token (what
// supabase.auth.signIn… gives a real page), joins any office that invited
// this user, and lists the user's offices.
async function signIn(url, publishableKey, token, server) {
  member = { token, server: server.replace(/\/+$/, '') }
  sb = supabase.createClient(url, publishableKey, {
    auth: { persistSession: false, autoRefreshToken: false },
    accessToken: async () => token,
  })
  await sb.realtime.setAuth() // Realtime joins with the member's token
  await sb.rpc('accept_office_invitations')
  const { data, error } = await sb.from('offices').select('id, name').order('name')
  if (error) throw error
  if (data.length === 0) throw new Error('You are a member of no office.')
  $('offices').replaceChildren(...data.map((o) => el('option', { value: o.id }, o.name)))
  $('signin').hidden = true
  $('office').hidden = false
  await open(data[0].id)
}

// open shows an office and watches it: one channel, one binding per table
// the office publishes, each filtered to the office; a change reloads the
// section it belongs to.
async function open(officeID) {
  office = officeID
  if (channel) await sb.removeChannel(channel)
  const sections = {
    office_agents: loadAgents, agent_sessions: loadAgents, user_questions: loadQuestions,
    dependency_requests: loadDeps, agent_invocations: loadInvocations, agent_results: loadResults,
  }
  channel = sb.channel(`office-${officeID}`)
  for (const [table, load] of Object.entries(sections)) {
    channel.on('postgres_changes', { event: '*', schema: 'public', table, filter: `office_id=eq.${officeID}` }, () => later(load))
  }
  channel.subscribe((status) => {
    $('live').textContent = status === 'SUBSCRIBED' ? 'live' : status.toLowerCase()
    document.body.dataset.live = status === 'SUBSCRIBED' ? 'yes' : 'no'
    if (status === 'SUBSCRIBED') reloadAll() // what changed while joining
  })
  await reloadAll()
}

const pending = new Set()
function later(load) { // one reload per section per 100 ms, however many changes
  if (pending.has(load)) return
  pending.add(load)
  setTimeout(() => { pending.delete(load); load() }, 100)
}
async function reloadAll() {
  await loadAgents()
  await Promise.all([loadQuestions(), loadDeps(), loadInvocations(), loadResults()])
}

async function loadAgents() {
  // Named columns: select('*') is refused on office_agents (launch_spec is not a member's).
  const { data, error } = await sb.from('office_agents')
    .select('id, name, role, status, agent_sessions(status, detail)').eq('office_id', office).order('name')
  if (error) return console.error(error)
  names = Object.fromEntries(data.map((a) => [a.id, a.name]))
  $('agents').replaceChildren(...data.map((a) => {
    const s = a.agent_sessions[0]
    return el('tr', { 'data-name': a.name }, el('td', {}, a.name), el('td', {}, a.role), el('td', {}, pill(a.status)),
      el('td', {}, s ? pill(s.status) : '', s?.detail ? el('div', { class: 'muted' }, s.detail) : ''))
  }))
  const to = $('message-agent'), keep = to.value
  to.replaceChildren(...data.map((a) => el('option', { value: a.id }, a.name)))
  if (keep) to.value = keep
}

async function loadQuestions() {
  const { data, error } = await sb.from('user_questions')
    .select('id, agent_id, question, question_type, options, context, required, default_answer, expires_at')
    .eq('office_id', office).eq('status', 'pending').order('created_at')
  if (error) return console.error(error)
  if (data.length === 0) return $('questions').replaceChildren(el('p', { class: 'muted' }, 'None.'))
  $('questions').replaceChildren(...data.map(questionBox))
}

// questionBox: option buttons for a selection or confirmation, a text box
// otherwise; answer_question checks the answer before it writes, and its
// error says why (the question keeps its id).
function questionBox(q) {
  const errBox = el('div', { class: 'error' })
  const answer = async (response) => {
    const { error } = await sb.rpc('answer_question', { question_id: q.id, response })
    fail(errBox, error)
    if (!error) later(loadQuestions)
  }
  const box = el('div', { class: 'question', 'data-id': q.id },
    el('div', { class: 'ask' }, `${names[q.agent_id] ?? 'agent'}: ${q.question}`),
    q.context ? el('div', { class: 'muted' }, q.context) : '')
  let options = Array.isArray(q.options) ? q.options : []
  if (q.question_type === 'confirmation' && options.length === 0) options = ['yes', 'no']
  for (const o of options) {
    const b = el('button', { type: 'button', class: 'option', 'data-option': o }, o)
    b.onclick = () => answer(o)
    box.append(b)
  }
  if (q.question_type === 'text' || options.length === 0) {
    const input = el('input', { placeholder: q.default_answer ?? 'Your answer', class: 'text' })
    const send = el('button', { type: 'button', class: 'answer' }, 'Answer')
    send.onclick = () => answer(input.value)
    box.append(el('div', {}, input, send))
  }
  box.append(errBox)
  return box
}

async function loadDeps() {
  // Named columns: value is never readable by a member.
  const { data, error } = await sb.from('dependency_requests')
    .select('id, agent_id, type, name, description, required, status').eq('office_id', office).eq('status', 'pending').order('created_at')
  if (error) return console.error(error)
  if (data.length === 0) return $('deps').replaceChildren(el('p', { class: 'muted' }, 'None.'))
  $('deps').replaceChildren(...data.map((d) => {
    const errBox = el('div', { class: 'error' })
    const secret = d.type === 'api_key' || d.type === 'env_variable'
    const input = el('input', secret ? { type: 'password', placeholder: 'secret (sealed by the office server)' } : { placeholder: 'value' })
    const provide = el('button', { type: 'button', class: 'provide' }, 'Provide')
    const reject = el('button', { type: 'button', class: 'reject' }, 'Reject')
    provide.onclick = async () => {
      const error = secret ? await provideSecret(d.id, input.value)
        : (await sb.rpc('provide_dependency', { dependency_id: d.id, value: input.value })).error
      fail(errBox, error)
      if (!error) later(loadDeps)
    }
    reject.onclick = async () => {
      const { error } = await sb.rpc('reject_dependency', { dependency_id: d.id, reason: input.value })
      fail(errBox, error)
      if (!error) later(loadDeps)
    }
    return el('div', { class: 'question', 'data-id': d.id },
      el('div', { class: 'ask' }, `${names[d.agent_id] ?? 'agent'} needs ${d.type} ${d.name}${d.required ? ' (required)' : ''}`),
      d.description ? el('div', { class: 'muted' }, d.description) : '', input, provide, reject, errBox)
  }))
}

// provideSecret gives a secret to the office server, which checks the
// member's token and membership and encrypts the value before it is
// stored; the database never sees it in clear (docs/frontend.md, "Secrets
// go through the server"). Returns the error, or null.
async function provideSecret(id, value) {
  if (!member.server) return { message: 'Secrets go through the office server: sign in again with its URL.' }
  try {
    const res = await fetch(`${member.server}/api/member/dependencies/${encodeURIComponent(id)}/provide`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${member.token}` },
      body: JSON.stringify({ value }),
    })
    if (res.ok) return null
    const body = await res.json().catch(() => ({}))
    return { code: String(res.status), message: body.error?.message ?? res.statusText }
  } catch (e) {
    return { message: `office server: ${e.message}` }
  }
}

async function loadInvocations() {
  const { data, error } = await sb.from('agent_invocations')
    .select('id, caller_agent_id, callee_agent_id, reason, status, error').eq('office_id', office)
    .order('created_at', { ascending: false }).limit(20)
  if (error) return console.error(error)
  $('invocations').replaceChildren(...data.map((i) => el('tr', { 'data-id': i.id, 'data-status': i.status },
    el('td', {}, `${names[i.caller_agent_id] ?? '?'} → ${i.callee_agent_id ? names[i.callee_agent_id] ?? '?' : '(nobody)'}`),
    el('td', {}, i.reason, i.error ? el('div', { class: 'error' }, i.error) : ''),
    el('td', {}, pill(i.status)))))
}

async function loadResults() {
  const { data, error } = await sb.from('agent_results')
    .select('id, from_agent_id, to_agent_id, content, status').eq('office_id', office)
    .order('created_at', { ascending: false }).limit(20)
  if (error) return console.error(error)
  $('results').replaceChildren(...data.map((r) => el('tr', { 'data-id': r.id },
    el('td', {}, `${names[r.from_agent_id] ?? '?'} → ${names[r.to_agent_id] ?? '?'}`),
    el('td', {}, r.content.length > 200 ? r.content.slice(0, 200) + '…' : r.content),
    el('td', {}, pill(r.status)))))
}

$('signin-form').onsubmit = async (ev) => {
  ev.preventDefault()
  try {
    await signIn($('url').value.trim(), $('key').value.trim(), $('token').value.trim(), $('server').value.trim())
  } catch (e) {
    fail($('signin-error'), e)
  }
}
$('offices').onchange = () => open($('offices').value)
$('message-form').onsubmit = async (ev) => {
  ev.preventDefault()
  const { error } = await sb.from('user_messages')
    .insert({ office_id: office, agent_id: $('message-agent').value, content: $('message-text').value })
  fail($('message-error'), error)
  if (!error) $('message-text').value = ''
}
