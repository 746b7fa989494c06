// The console's members panel: who may use the office's web frontend
// (Supabase users in office_members, and invited emails), through the admin
// API (GET/POST/DELETE /api/offices/{office}/members). Self-contained: it
// follows the office chosen in #office and renders into #members-panel.
'use strict';
(() => {
  const box = document.getElementById('members-panel');
  const officeSel = document.getElementById('office');
  if (!box || !officeSel) return;
  const rows = box.querySelector('#members tbody');
  const form = box.querySelector('#memberadd');
  const say = (msg) => { box.querySelector('#membersnote').textContent = msg || ''; };

  async function call(method, path, body) {
    const opts = { method, headers: {}, credentials: 'same-origin' };
    if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
    const res = await fetch(path, opts);
    const data = await res.json().catch(() => null);
    if (!res.ok) throw Object.assign(new Error((data && data.error && data.error.message) || res.statusText), { status: res.status });
    return data;
  }
  const path = () => `/api/offices/${encodeURIComponent(officeSel.value)}/members`;

  function cell(text) { const td = document.createElement('td'); td.textContent = text; return td; }

  // The form shows once an office is chosen and its members are listed
  // (index.html starts it hidden), so nothing is added to no office.
  async function load() {
    if (!officeSel.value) return;
    let list;
    try {
      list = await call('GET', path());
    } catch (e) {
      rows.replaceChildren();
      form.hidden = e.status === 501; // no members with this store (SQLite)
      say(e.message);
      return;
    }
    form.hidden = false;
    rows.replaceChildren(...list.map((m) => {
      const tr = document.createElement('tr');
      tr.dataset.email = m.email || '';
      tr.dataset.status = m.status;
      const rm = document.createElement('button');
      rm.type = 'button';
      rm.className = 'remove danger';
      rm.textContent = m.status === 'invited' ? 'Withdraw…' : 'Remove…';
      // Destructive: the first click asks to be confirmed (confirmClick, app.js).
      rm.onclick = (ev) => confirmClick(ev.currentTarget, m.status === 'invited' ? 'withdraw' : 'remove', async () => {
        try { await call('DELETE', `${path()}/${encodeURIComponent(m.user_id || m.email)}`); say(''); } catch (e) { say(e.message); }
        load();
      });
      const action = document.createElement('td');
      action.append(rm);
      tr.append(cell(m.email || m.user_id), cell(m.role), cell(m.status), action);
      return tr;
    }));
    if (!list.length) say('no members yet');
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!officeSel.value) { say('choose an office first'); return; }
    const who = form.querySelector('#memberwho').value.trim();
    const role = form.querySelector('#memberrole').value;
    const body = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(who) ? { user_id: who, role } : { email: who, role };
    try {
      const m = await call('POST', path(), body);
      form.querySelector('#memberwho').value = '';
      say(m.status === 'invited' ? `${m.email} invited: they join when they sign up` : '');
    } catch (e) { say(e.message); }
    load();
  });
  officeSel.addEventListener('change', load);
  // The office list is filled by app.js: load once it has a value.
  const wait = setInterval(() => { if (officeSel.value) { clearInterval(wait); load(); } }, 200);
})();
