// The web frontend's jobs, done with the official @supabase/supabase-js
// against a Supabase project with office-server serve behind it, as
// member A (office A), member B (office B) and anon. Run by
// TestSupabaseJS (cmd/office-server/serve_supabase_test.go), which starts
// the stand-in project and the server and passes:
//   SUPABASE_URL, ANON_KEY, TOKEN_A, USER_A, TOKEN_B, OFFICE_A, OFFICE_B
// Prints one line per check; exits 1 at the first failure.
import { createClient } from '@supabase/supabase-js'
import { WebSocket } from 'ws'
import assert from 'node:assert/strict'

const env = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set`)
  return v
}
const url = env('SUPABASE_URL'), anonKey = env('ANON_KEY')
const officeA = env('OFFICE_A'), officeB = env('OFFICE_B'), userA = env('USER_A')

// A signed-in member's client: the access token is the user's JWT
// (as after supabase.auth.signIn…), sent to REST and Realtime.
const client = (token) => createClient(url, anonKey, {
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
let step = 0
async function check(name, fn) {
  step++
  try {
    await fn()
    console.log(`ok ${step} - ${name}`)
  } catch (e) {
    console.log(`not ok ${step} - ${name}: ${e.stack || e}`)
    process.exit(1)
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
    const { data, error } = await a.from('office_agents').select('*, agent_sessions(status)').eq('office_id', officeA).order('name')
    assert.equal(error, null)
    return data.length === 2 && data.every((x) => x.agent_sessions.length === 1) && data
  })
  assert.deepEqual(agents.map((x) => x.name), ['dev', 'po'])
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
  for (const t of ['offices', 'office_agents', 'agent_sessions', 'user_questions', 'user_messages', 'agent_invocations', 'office_events']) {
    const col = t === 'offices' ? 'id' : 'office_id'
    const { data, error } = await b.from(t).select('*').eq(col, officeA)
    assert.equal(error, null, `${t}: ${JSON.stringify(error)}`)
    assert.deepEqual(data, [], `member B read ${t} of office A`)
  }
  const { data: own } = await b.from('offices').select('id')
  assert.deepEqual(own.map((o) => o.id), [officeB], 'member B sees its own office only')
  const { error, status } = await anon.from('user_questions').select('*')
  assert.equal(status, 401)
  assert.equal(error.code, '42501')
})

const live = { a: watch(a, 'a'), b: watch(b, 'b'), anon: watch(anon, 'anon') }
await check('member A, member B and anon subscribe to office A over Realtime', async () => {
  await Promise.all([live.a.joined, live.b.joined, live.anon.joined])
})

await check('member B and anon cannot answer office A\'s question', async () => {
  const rb = await b.from('user_questions').update({ response: 'B was here', status: 'answered' }).eq('id', question.id).select()
  assert.equal(rb.error, null)
  assert.deepEqual(rb.data, [], 'RLS hides the row from B')
  const ra = await anon.from('user_questions').update({ response: 'anon', status: 'answered' }).eq('id', question.id).select()
  assert.equal(ra.status, 401)
  assert.equal(ra.error.code, '42501')
  const { data } = await a.from('user_questions').select('status').eq('id', question.id).single()
  assert.equal(data.status, 'pending')
})

await check('a member may not write columns other than response and status (answered_at: 42501)', async () => {
  const { error, status } = await a.from('user_questions')
    .update({ response: question.options[0], status: 'answered', answered_at: new Date().toISOString() }).eq('id', question.id).select()
  assert.equal(status, 403)
  assert.equal(error.code, '42501')
})

await check('member A answers: update({response, status}).eq(id).select(), stamped by the member trigger', async () => {
  const { data, error } = await a.from('user_questions')
    .update({ response: question.options[0], status: 'answered' }).eq('id', question.id).select()
  assert.equal(error, null)
  assert.equal(data.length, 1)
  assert.equal(data[0].status, 'answered')
  assert.equal(data[0].answered_by, userA)
  assert.ok(data[0].answered_at)
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

await a.removeAllChannels(); await b.removeAllChannels(); await anon.removeAllChannels()
console.log(`1..${step}`)
process.exit(0)
