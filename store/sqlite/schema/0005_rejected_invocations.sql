-- migrations/20261125000000_frontend_contract.sql in SQLite's terms: a
-- rejected invocation may name no callee (no agent could take it), so that
-- it is stored with its reason. SQLite cannot drop a NOT NULL constraint
-- with ALTER TABLE, and rebuilding the table would fire its references' ON
-- DELETE actions; dropping NOT NULL and adding a CHECK that every existing
-- row satisfies do not change the file's format, so the table's definition
-- is edited in place (sqlite.org/lang_altertable.html, "Making Other Kinds
-- Of Table Schema Changes"). The index below is a real schema change,
-- which bumps schema_version so that every connection reloads the schema.

pragma writable_schema = on;
update sqlite_schema
   set sql = replace(sql,
       'callee_agent_id      text not null,',
       'callee_agent_id      text check (callee_agent_id is not null or status = ''rejected''),')
 where type = 'table' and name = 'agent_invocations';
pragma writable_schema = off;

create index agent_invocations_rejected_idx on agent_invocations (office_id, created_at) where status = 'rejected';
