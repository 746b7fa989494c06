package supabasetest

// realtimeSQL is the stand-in's own schema "realtime" (the place the real
// service keeps its functions in a project's database): a cast of a
// wal2json value to its column type as JSON, and a filter check, both
// written here after what realtime.cast and realtime.check_equality_op do
// (docs/notes/supabase.md, "The Realtime stand-in").
const realtimeSQL = `
create schema if not exists realtime;

create or replace function realtime.standin_cast(val text, type_ regtype) returns jsonb
language plpgsql immutable as $$
declare
  res jsonb;
begin
  if val is null then
    return 'null'::jsonb;
  end if;
  execute format('select to_jsonb(%L::%s)', val, type_::text) into res;
  return res;
end
$$;

create or replace function realtime.standin_check(op text, type_ regtype, val_1 text, val_2 text) returns boolean
language plpgsql immutable as $$
declare
  res boolean;
  sym text;
begin
  if op = 'in' then
    execute format('select %L::%s = any(%L::%s[])', val_1, type_::text, val_2, type_::text) into res;
    return coalesce(res, false);
  end if;
  if op = 'is' then
    case lower(val_2)
      when 'null' then return val_1 is null;
      when 'not_null' then return val_1 is not null;
      when 'true' then return val_1::boolean is true;
      when 'false' then return val_1::boolean is false;
      when 'unknown' then return val_1::boolean is unknown;
      else raise exception 'unsupported is value %', val_2;
    end case;
  end if;
  sym := case op
    when 'eq' then '=' when 'neq' then '<>' when 'lt' then '<' when 'lte' then '<='
    when 'gt' then '>' when 'gte' then '>=' when 'like' then '~~' when 'ilike' then '~~*'
    when 'match' then '~' when 'imatch' then '~*' when 'isdistinct' then 'is distinct from'
  end;
  if sym is null then
    raise exception 'unsupported filter operator %', op;
  end if;
  if op in ('like', 'ilike', 'match', 'imatch') then
    execute format('select %L::text %s %L::text', val_1, sym, val_2) into res;
  else
    execute format('select %L::%s %s %L::%s', val_1, type_::text, sym, val_2, type_::text) into res;
  end if;
  return coalesce(res, false);
end
$$;
`
