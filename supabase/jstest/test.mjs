// The web frontend's jobs, done with the official @supabase/supabase-js
// against a Supabase project with office-server serve behind it, as
// member A (office A), member B (office B) and anon, on a project created
// today: the publishable key (sb_publishable_…) and members' access
// tokens signed with the project's asymmetric key (ES256, by kid). Run by
// TestSupabaseJS (cmd/office-server/serve_supabase_test.go), which starts
// the stand-in project and the server and passes:
//   SUPABASE_URL, PUBLISHABLE_KEY, TOKEN_A, USER_A (an owner of office A),
//   TOKEN_B, USER_B, OFFICE_A, OFFICE_B,
//   CANARY (a secret in po's env in the office file, which the server
//   stores in office_agents.launch_spec),
//   READABLE (JSON: table → the columns a member may select, read from the
//   database's grants), PUBLISHED (the tables in supabase_realtime), EXPIRED_B (a question of office B past its expiry),
//   DEP_PKG_B, DEP_KEY_B (pending package and api_key requests of office B),
//   SERVER_URL (the office server), DEP_SECRET_B, DEP_ENV_B (pending api_key
//   and env_variable requests of office B), DEP_LATE_B (an expired one),
//   TOKEN_NEW, USER_NEW (newcomer@example.com, who signs up once invited).
// Prints one line per check; exits 1 at the first failure. The contract
// it checks is docs/frontend.md.
import { createClient } from '@supabase/supabase-js'
import { WebSocket } from 'ws'
import assert from 'node:assert/strict'

const env = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set`)
  return v
}
const url = env('SUPABASE_URL'), publishableKey = env('PUBLISHABLE_KEY')
const officeA = env('OFFICE_A'), officeB = env('OFFICE_B'), userA = env('USER_A'), userB = env('USER_B')
const canary = env('CANARY'), readable = JSON.parse(env('READABLE'))

// A signed-in member's client: the access token is the user's JWT
// (as after supabase.auth.signIn…), sent to REST and Realtime.
const client = (token) => createClient(url, publishableKey, {
  auth: { persistSession: false, autoRefreshToken: false },
  realtime: { transport: WebSocket }, // Node 20 has no global WebSocket
  ...(token ? { accessToken: async () => token } : {}),
})
const a = client(env('TOKEN_A')), b = client(env('TOKEN_B')), anon = client(null)

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function until(what, fn, ms = 60000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}
// JSTEST_KEEP_GOING=1 runs every check after a failure (to see which
// checks an older schema fails); by default the first failure ends the run.
let step = 0, failed = 0
async function check(name, fn) {
  step++
  try {
    await fn()
    console.log(`ok ${step} - ${name}`)
  } catch (e) {
    failed++
    console.log(`not ok ${step} - ${name}: ${e.stack || e}`)
    if (!process.env.JSTEST_KEEP_GOING) process.exit(1)
  }
}

// Subscribes to new questions of office A; resolves when joined.
function watch(c, label) {
  const seen = { inserts: [], updates: [], errors: [] }
  const ch = c.channel(`office-${label}`)
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'user_questions', filter: `office_id=eq.${officeA}` },
      (p) => { (p.errors ? seen.errors : seen.inserts).push(p) })
    .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'user_questions', filter: `office_id=eq.${officeA}` },
      (p) => { (p.errors ? seen.errors : seen.updates).push(p) })
  const joined = new Promise((resolve, reject) => ch.subscribe((status, err) => {
    if (status === 'SUBSCRIBED') resolve()
    else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') reject(new Error(`${label}: ${status} ${err ?? ''}`))
  }))
  return { seen, joined, ch }
}

let agents, question

await check('member A lists the agents of office A with their sessions (embedding)', async () => {
  agents = await until('both agents with a session', async () => {
    const { data, error } = await a.from('office_agents').select('id, name, role, status, agent_sessions(status, detail)').eq('office_id', officeA).order('name')
    assert.equal(error, null)
    return data.length === 3 && data.every((x) => x.agent_sessions.length === 1) && data
  })
  assert.deepEqual(agents.map((x) => x.name), ['dev', 'po', 'scout'])
  for (const x of agents) assert.equal(typeof x.agent_sessions[0].status, 'string')
})

await check('member A counts and lists the pending questions (count=exact)', async () => {
  await until('a pending question', async () => {
    const { count, error } = await a.from('user_questions').select('*', { count: 'exact', head: true })
      .eq('office_id', officeA).eq('status', 'pending')
    assert.equal(error, null)
    return count === 1
  })
  const { data, error } = await a.from('user_questions').select('id, question, options, status, agent_id')
    .eq('office_id', officeA).eq('status', 'pending')
  assert.equal(error, null)
  assert.equal(data.length, 1)
  question = data[0]
  assert.ok(question.options.length > 0, 'po offers options')
})

await check('member B and anon see nothing of office A', async () => {
  for (const t of Object.keys(readable)) { // every table a member may read, from the grants
    const col = t === 'offices' ? 'id' : 'office_id'
    const { data, error } = await b.from(t).select(readable[t].join(',')).eq(col, officeA)
    assert.equal(error, null, `${t}: ${JSON.stringify(error)}`)
    assert.deepEqual(data, [], `member B read ${t} of office A`)
  }
  const { data: own } = await b.from('offices').select('id')
  assert.deepEqual(own.map((o) => o.id), [officeB], 'member B sees its own office only')
  for (const t of Object.keys(readable)) {
    const { error, status } = await anon.from(t).select(readable[t].join(','))
    assert.equal(status, 401, `anon read ${t}: ${JSON.stringify(error)}`)
    assert.equal(error.code, '42501')
  }
})

const live = { a: watch(a, 'a'), b: watch(b, 'b'), anon: watch(anon, 'anon') }
// Member A, member B and anon also watch every published table of office
// A (each on its own client: the Realtime stand-in serves one channel per
// socket). The tables come from the publication itself.
const published = env('PUBLISHED').split(',')
assert.ok(published.includes('office_agents') && published.length >= 8, `published: ${published}`)
async function watchAll(token, label) {
  const c = client(token), events = []
  if (token) await c.realtime.setAuth() // the join then carries the member's token, not the publishable key
  let ch = c.channel(`office-${label}-all`)
  for (const table of published) {
    ch = ch.on('postgres_changes', { event: '*', schema: 'public', table, filter: `office_id=eq.${officeA}` }, (p) => events.push({ ...p, at: Date.now() }))
  }
  const joined = new Promise((resolve, reject) => ch.subscribe((status, err) => {
    if (status === 'SUBSCRIBED') resolve()
    else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') reject(new Error(`${label} all: ${status} ${err ?? ''}`))
  }))
  return { c, events, joined }
}
const allA = await watchAll(env('TOKEN_A'), 'a'), allB = await watchAll(env('TOKEN_B'), 'b'), allAnon = await watchAll(null, 'anon')
const everything = allA.events
const allJoined = Promise.all([allA.joined, allB.joined, allAnon.joined])
await check('member A, member B and anon subscribe to office A over Realtime', async () => {
  await Promise.all([live.a.joined, live.b.joined, live.anon.joined, allJoined])
})

await check('member B and anon cannot answer office A\'s question: 404 PT404 and 401, not 200 []', async () => {
  const rb = await b.rpc('answer_question', { question_id: question.id, response: question.options[0] })
  assert.equal(rb.status, 404, JSON.stringify(rb))
  assert.equal(rb.error.code, 'PT404')
  const ra = await anon.rpc('answer_question', { question_id: question.id, response: question.options[0] })
  assert.equal(ra.status, 401)
  assert.equal(ra.error.code, '42501')
  const { data } = await a.from('user_questions').select('status').eq('id', question.id).single()
  assert.equal(data.status, 'pending')
})

await check('the UPDATE path is closed: update({response, status}) is 403 42501', async () => {
  const { error, status } = await a.from('user_questions')
    .update({ response: question.options[0], status: 'answered' }).eq('id', question.id).select()
  assert.equal(status, 403, JSON.stringify(error))
  assert.equal(error.code, '42501')
})

await check('an answer that is not one of the options is refused before the write (400 22023); the question keeps its id', async () => {
  const r = await a.rpc('answer_question', { question_id: question.id, response: 'Purple elephants' })
  assert.equal(r.status, 400, JSON.stringify(r))
  assert.equal(r.error.code, '22023')
  assert.match(r.error.message, /not one of the options/)
  const { data } = await a.from('user_questions').select('id, status').eq('office_id', officeA).eq('status', 'pending')
  assert.deepEqual(data.map((q) => q.id), [question.id], 'the same question is still the pending one')
})

await check('member A answers: rpc(answer_question) returns the answered row, stamped, in the option\'s spelling', async () => {
  const { data, error } = await a.rpc('answer_question', { question_id: question.id, response: `  ${question.options[0].toUpperCase()} ` })
  assert.equal(error, null)
  assert.equal(data.id, question.id)
  assert.equal(data.status, 'answered')
  assert.equal(data.response, question.options[0])
  assert.equal(data.answered_by, userA)
  assert.ok(data.answered_at)
})

await check('answering again is 409 PT409 (answered), not a silent no-op', async () => {
  const r = await a.rpc('answer_question', { question_id: question.id, response: question.options[0] })
  assert.equal(r.status, 409, JSON.stringify(r))
  assert.equal(r.error.code, 'PT409')
})

await check('answering an expired question is 410 PT410', async () => {
  const r = await b.rpc('answer_question', { question_id: env('EXPIRED_B'), response: 'late' })
  assert.equal(r.status, 410, JSON.stringify(r))
  assert.equal(r.error.code, 'PT410')
})

await check('member A sees the answer and then the next question live; B and anon see no row', async () => {
  await until('the answer over Realtime', async () => live.a.seen.updates.some((p) => p.new.id === question.id && p.new.status === 'answered'))
  const next = await until('a new question over Realtime', async () => live.a.seen.inserts.find((p) => p.new.id !== question.id && p.new.status === 'pending'), 90000)
  assert.equal(next.new.office_id, officeA)
  assert.equal(next.eventType, 'INSERT')
  await sleep(1000) // anything for B would have come by now (the stand-in polls every 100-500 ms)
  assert.deepEqual(live.b.seen.inserts.concat(live.b.seen.updates), [], 'member B got office A\'s rows')
  for (const p of live.anon.seen.inserts.concat(live.anon.seen.updates, live.anon.seen.errors)) {
    assert.deepEqual(p.new ?? {}, {}, 'anon got a record of office A')
  }
})

await check('member A sends a message; member B cannot', async () => {
  const po = agents.find((x) => x.name === 'po')
  const { data, error } = await a.from('user_messages').insert({ office_id: officeA, agent_id: po.id, content: 'hello po' }).select()
  assert.equal(error, null)
  assert.equal(data[0].user_id, userA)
  assert.equal(data[0].status, 'pending')
  const rb = await b.from('user_messages').insert({ office_id: officeA, agent_id: po.id, content: 'from B' }).select()
  assert.equal(rb.status, 403)
  assert.equal(rb.error.code, '42501')
})

await check('dependency values never reach a member: select(*) is refused, other columns read', async () => {
  const r = await a.from('dependency_requests').select('*').eq('office_id', officeA)
  assert.equal(r.status, 403)
  assert.equal(r.error.code, '42501')
  const ok = await a.from('dependency_requests').select('id, name, status').eq('office_id', officeA)
  assert.equal(ok.error, null)
})

await check('member B provides a package dependency (rpc provide_dependency); again is 409; A cannot (404)', async () => {
  const ra = await a.rpc('provide_dependency', { dependency_id: env('DEP_PKG_B'), value: 'socket.io' })
  assert.equal(ra.status, 404, JSON.stringify(ra))
  assert.equal(ra.error.code, 'PT404')
  const bad = await b.rpc('provide_dependency', { dependency_id: env('DEP_PKG_B'), value: '../etc' })
  assert.equal(bad.status, 400, JSON.stringify(bad))
  assert.equal(bad.error.code, '22023')
  const { data, error } = await b.rpc('provide_dependency', { dependency_id: env('DEP_PKG_B'), value: 'socket.io' })
  assert.equal(error, null)
  assert.equal(data.length, 1)
  assert.equal(data[0].status, 'provided')
  assert.equal(data[0].value, undefined, 'the value is not returned')
  const again = await b.rpc('provide_dependency', { dependency_id: env('DEP_PKG_B'), value: 'socket.io' })
  assert.equal(again.status, 409)
  assert.equal(again.error.code, 'PT409')
})

await check('a secret (api_key) is refused by provide_dependency (403 42501); member B rejects it with a reason', async () => {
  const r = await b.rpc('provide_dependency', { dependency_id: env('DEP_KEY_B'), value: 'sk-abcdefgh12345' })
  assert.equal(r.status, 403, JSON.stringify(r))
  assert.equal(r.error.code, '42501')
  const { data, error } = await b.rpc('reject_dependency', { dependency_id: env('DEP_KEY_B'), reason: 'use the staging key' })
  assert.equal(error, null)
  assert.equal(data[0].status, 'rejected')
  const { data: row } = await b.from('dependency_requests').select('status, rejection_reason').eq('id', env('DEP_KEY_B')).single()
  assert.deepEqual(row, { status: 'rejected', rejection_reason: 'use the staging key' })
})

const membersB = {} // when member B was in office A (check 16)
await check('owner A manages members: add by email (invite when unknown), list with emails, remove; B (not owner) cannot', async () => {
  const inv = await a.rpc('add_office_member', { office_id: officeA, email: 'newcomer@example.com' })
  assert.equal(inv.error, null, JSON.stringify(inv.error))
  assert.equal(inv.data.status, 'invited')
  const { data: invites } = await a.from('office_invitations').select('email, role').eq('office_id', officeA)
  assert.deepEqual(invites, [{ email: 'newcomer@example.com', role: 'member' }])
  membersB.added = Date.now()
  const add = await a.rpc('add_office_member', { office_id: officeA, email: 'B@example.com' })
  assert.equal(add.error, null, JSON.stringify(add.error))
  assert.deepEqual([add.data.status, add.data.user_id], ['added', userB])
  const twice = await a.rpc('add_office_member', { office_id: officeA, email: 'b@example.com' })
  assert.equal(twice.status, 409)
  const { data: list, error } = await a.rpc('list_office_members', { office_id: officeA })
  assert.equal(error, null)
  assert.deepEqual(list.map((m) => [m.email, m.role]).sort(), [['a@example.com', 'owner'], ['b@example.com', 'member']])
  const byB = await b.rpc('add_office_member', { office_id: officeA, email: 'x@example.com' })
  assert.equal(byB.status, 403)
  assert.equal(byB.error.code, '42501')
  const last = await a.rpc('remove_office_member', { office_id: officeA, user_id: userA })
  assert.equal(last.status, 409, 'the last owner cannot leave')
  const rm = await a.rpc('remove_office_member', { office_id: officeA, user_id: userB })
  assert.equal(rm.error, null)
  membersB.removed = Date.now()
  const { data: seen } = await b.from('offices').select('id')
  assert.deepEqual(seen.map((o) => o.id), [officeB], 'B is out of office A again')
  const bJoin = await b.from('office_members').insert({ office_id: officeA, user_id: userB })
  assert.equal(bJoin.status, 403, 'a member cannot add themselves')
})

await check('no secret reaches a member: every readable column of every table, and the live changes so far', async () => {
  for (const [table, col] of [['office_agents', 'launch_spec'], ['dependency_requests', 'value']]) {
    assert.ok(readable[table], `${table} is not readable at all`)
    assert.ok(!readable[table].includes(col), `${table}.${col} is granted to members`)
  }
  for (const [table, cols] of Object.entries(readable)) {
    const { data, error } = await a.from(table).select(cols.join(','))
    assert.equal(error, null, `${table}: ${JSON.stringify(error)}`)
    assert.ok(!JSON.stringify(data).includes(canary), `${table} shows the office file's secret (canary)`)
  }
  const leaked = everything.filter((p) => JSON.stringify(p).includes(canary))
  assert.deepEqual(leaked.map((p) => p.table), [], 'a live change carried the office file secret (canary)')
})

await check('member A watches invocations live: the one po gave dev after the answer', async () => {
  // po's, by its caller: scout's rejected INVOKE:ghost may come first.
  const po = agents.find((x) => x.name === 'po')
  const inv = await until('po\'s invocation over Realtime', async () => everything.find((p) => p.table === 'agent_invocations' && p.eventType === 'INSERT' && p.new?.caller_agent_id === po.id), 90000)
  assert.equal(inv.new.office_id, officeA)
  assert.ok(inv.new.reason.toLowerCase().includes(question.options[0].toLowerCase()), `the task carries the answer: ${inv.new.reason}`)
})

await check('member A sees why an invocation was rejected: stored with its reason, no callee', async () => {
  const scout = agents.find((x) => x.name === 'scout')
  const inv = await until('scout\'s rejected INVOKE:ghost', async () => {
    const { data, error } = await a.from('agent_invocations')
      .select('id, caller_agent_id, callee_agent_id, reason, status, error').eq('office_id', officeA).eq('status', 'rejected')
    assert.equal(error, null)
    return data.find((i) => i.caller_agent_id === scout.id)
  }, 30000)
  assert.equal(inv.callee_agent_id, null)
  assert.match(inv.reason, /find the ghost/)
  assert.match(inv.error, /ghost/)
})

await check('member A provides scout\'s package (rpc provide_dependency) and the server delivers it to scout', async () => {
  const scout = agents.find((x) => x.name === 'scout')
  const dep = await until('scout\'s dependency request', async () => {
    const { data } = await a.from('dependency_requests').select('id, type, name, status')
      .eq('office_id', officeA).eq('agent_id', scout.id).eq('status', 'pending')
    return data?.[0]
  }, 30000)
  assert.deepEqual([dep.type, dep.name], ['package', 'left-pad'])
  const { error } = await a.rpc('provide_dependency', { dependency_id: dep.id, value: 'left-pad' })
  assert.equal(error, null, JSON.stringify(error))
  await until('the server delivered it', async () => {
    const { data } = await a.from('dependency_requests').select('status, delivered_at').eq('id', dep.id).single()
    return data.status === 'provided' && data.delivered_at
  }, 30000)
  // The value is in the WAL (wal2json ignores the publication's column
  // list); Realtime leaves it out because member A may not select it.
  await until('the provided change over Realtime', async () =>
    everything.some((p) => p.table === 'dependency_requests' && p.new?.id === dep.id && p.new?.status === 'provided'), 30000)
  const withValue = everything.filter((p) => p.table === 'dependency_requests' &&
    ('value' in (p.new ?? {}) || 'value' in (p.old ?? {}) || JSON.stringify(p).includes('6c6566742d706164'))) // hex of left-pad
  assert.deepEqual(withValue, [], 'a live dependency_requests change carried value')
})

await check('secrets go through the server: member B provides an api_key and rejects an env_variable with their token; A 404, the publishable key and no token 401 (provide and reject), again 409, expired 410', async () => {
  const server = env('SERVER_URL')
  const call = async (token, id, action, body) => {
    const res = await fetch(`${server}/api/member/dependencies/${id}/${action}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: await res.json() }
  }
  const secret = 'sk-live-member-b-0123456789', id = env('DEP_SECRET_B')
  for (const [who, token, want] of [['no token', null, 401], ['the publishable key', publishableKey, 401], ['member A', env('TOKEN_A'), 404]]) {
    for (const [action, body] of [['provide', { value: secret }], ['reject', { reason: 'not yours' }]]) {
      const r = await call(token, id, action, body)
      assert.equal(r.status, want, `${who} ${action}: ${JSON.stringify(r)}`)
      assert.ok(r.body.error.message, `${who} ${action}: a message says why`)
    }
  }
  const bad = await call(env('TOKEN_B'), id, 'provide', { value: '' })
  assert.equal(bad.status, 400, JSON.stringify(bad))
  const ok = await call(env('TOKEN_B'), id, 'provide', { value: secret })
  assert.equal(ok.status, 200, JSON.stringify(ok))
  assert.equal(ok.body.status, 'provided')
  assert.ok(!JSON.stringify(ok.body).includes(secret), 'the answer does not carry the value')
  const again = await call(env('TOKEN_B'), id, 'provide', { value: secret })
  assert.equal(again.status, 409, JSON.stringify(again))
  const late = await call(env('TOKEN_B'), env('DEP_LATE_B'), 'provide', { value: secret })
  assert.equal(late.status, 410, JSON.stringify(late))
  const rej = await call(env('TOKEN_B'), env('DEP_ENV_B'), 'reject', { reason: 'no region yet' })
  assert.equal(rej.status, 200, JSON.stringify(rej))
  const { data: rows, error } = await b.from('dependency_requests').select('id, status, rejection_reason')
    .in('id', [id, env('DEP_ENV_B')]).order('name')
  assert.equal(error, null)
  assert.deepEqual(rows.map((r) => [r.status, r.rejection_reason ?? null]), [['provided', null], ['rejected', 'no region yet']])
  const v = await b.from('dependency_requests').select('value').eq('id', id)
  assert.equal(v.status, 403, 'the sealed value is not readable either')
})

await check('anon is refused every write and function of the contract (401 42501); member B every one on office A (404 or 403)', async () => {
  const scout = agents.find((x) => x.name === 'scout')
  const { data: deps } = await a.from('dependency_requests').select('id').eq('office_id', officeA).eq('agent_id', scout.id)
  assert.ok(deps.length > 0, 'office A has a dependency request')
  const depA = deps[0].id
  const calls = {
    'insert user_messages': (c) => c.from('user_messages').insert({ office_id: officeA, agent_id: scout.id, content: 'x' }),
    answer_question: (c) => c.rpc('answer_question', { question_id: question.id, response: 'x' }),
    provide_dependency: (c) => c.rpc('provide_dependency', { dependency_id: depA, value: 'left-pad' }),
    reject_dependency: (c) => c.rpc('reject_dependency', { dependency_id: depA, reason: 'x' }),
    add_office_member: (c) => c.rpc('add_office_member', { office_id: officeA, email: 'x@example.com' }),
    list_office_members: (c) => c.rpc('list_office_members', { office_id: officeA }),
    remove_office_member: (c) => c.rpc('remove_office_member', { office_id: officeA, user_id: userA }),
    'insert office_members': (c) => c.from('office_members').insert({ office_id: officeA, user_id: userB }),
    'read office_invitations': async (c) => {
      const r = await c.from('office_invitations').select('email').eq('office_id', officeA)
      return r.status === 200 && r.data.length === 0 ? { status: 404, error: { code: 'empty' } } : r
    },
  }
  for (const [name, call] of Object.entries(calls)) {
    const r = await call(anon)
    assert.equal(r.status, 401, `anon ${name}: ${JSON.stringify(r)}`)
    assert.equal(r.error.code, '42501', `anon ${name}`)
    const rb = await call(b)
    assert.ok([403, 404].includes(rb.status), `member B ${name} on office A: ${JSON.stringify(rb)}`)
  }
  const anonAccept = await anon.rpc('accept_office_invitations')
  assert.equal(anonAccept.status, 401)
})

await check('every published table sent member A changes, each with only the columns a member may select and no secret; member B and anon got no row of office A', async () => {
  const unseen = () => published.filter((t) => !everything.some((p) => p.table === t && Object.keys(p.new ?? {}).length))
  await until('a live change of every published table', async () => unseen().length === 0, 30000)
    .catch((e) => { throw new Error(`${e.message}: none of ${unseen().join(', ')}`) })
  const leaked = everything.filter((p) => JSON.stringify(p).includes(canary))
  assert.deepEqual(leaked.map((p) => p.table), [], 'a live change carried the office file secret (canary)')
  for (const p of everything) {
    for (const rec of [p.new, p.old]) {
      const extra = Object.keys(rec ?? {}).filter((k) => !readable[p.table].includes(k))
      assert.deepEqual(extra, [], `a live ${p.eventType} of ${p.table} carried columns a member may not select`)
    }
  }
  // Member B was a member of office A during check 16 (and may get rows
  // already on their way for a poll or two after): only then.
  const inB = (p) => p.at >= membersB.added && p.at <= membersB.removed + 2000
  for (const [who, events, ok] of [['member B', allB.events, inB], ['anon', allAnon.events, () => false]]) {
    const rows = events.filter((p) => (Object.keys(p.new ?? {}).length || Object.keys(p.old ?? {}).length) && !ok(p))
    assert.deepEqual(rows.map((p) => p.table), [], `${who} got office A's rows live`)
  }
  const seenTables = [...new Set(everything.map((p) => p.table))].sort()
  const errored = (evs) => evs.filter((p) => p.errors?.length).length
  console.log(`# live changes seen by member A: ${everything.length} (${errored(everything)} with errors) on ${seenTables.join(', ')}; by member B: ${allB.events.length}; by anon: ${allAnon.events.length} (${errored(allAnon.events)} with errors, none with a row)`)
})

await check('an invited user signs up and joins: accept_office_invitations returns office A; they read it and are listed; again joins nothing', async () => {
  const n = client(env('TOKEN_NEW'))
  const joined = await until('the newcomer joined', async () => {
    const { data, error } = await n.rpc('accept_office_invitations')
    assert.equal(error, null, JSON.stringify(error))
    return data.length > 0 && data
  }, 30000)
  assert.deepEqual(joined, [officeA])
  const { data: offices } = await n.from('offices').select('id')
  assert.deepEqual(offices.map((o) => o.id), [officeA])
  const { data: members } = await a.rpc('list_office_members', { office_id: officeA })
  assert.deepEqual(members.filter((m) => m.user_id === env('USER_NEW')).map((m) => [m.email, m.role]), [['newcomer@example.com', 'member']])
  const { data: invites } = await a.from('office_invitations').select('email').eq('office_id', officeA)
  assert.deepEqual(invites, [], 'the invitation is used up')
  const again = await n.rpc('accept_office_invitations')
  assert.deepEqual([again.error, again.data], [null, []])
})

// office_events.raw is an agent's output as it printed it (a secret it
// printed would be there): members read every other column (migration
// 20261128110000_office_events_raw.sql).
await check('a member cannot read office_events.raw: naming it or * is refused (403 42501), the other columns read, no live event carries it', async () => {
  const { data: events, error } = await a.from('office_events').select('id, kind, payload').eq('office_id', officeA)
  assert.equal(error, null, JSON.stringify(error))
  assert.ok(events.length > 0, 'member A reads office A\'s events')
  for (const cols of ['id, raw', '*']) {
    const r = await a.from('office_events').select(cols).eq('office_id', officeA)
    assert.deepEqual([r.status, r.error?.code, r.data], [403, '42501', null], `select(${cols}): ${JSON.stringify(r.error)}`)
  }
  const withRaw = everything.filter((p) => p.table === 'office_events' && ('raw' in (p.new ?? {}) || 'raw' in (p.old ?? {})))
  assert.deepEqual(withRaw, [], 'a live office_events change carried raw')
})

await a.removeAllChannels(); await allA.c.removeAllChannels(); await allB.c.removeAllChannels(); await allAnon.c.removeAllChannels(); await b.removeAllChannels(); await anon.removeAllChannels()
console.log(`1..${step}`)
process.exit(failed ? 1 : 0)
