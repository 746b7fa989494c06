-- A member denies a permission request with a reason, as the console and
-- the admin API already do (engine/api.go AnswerQuestion): any non-empty
-- text answers a question of category permission; the server reads it
-- (engine/permission.go parsePermissionAnswer: an option, "deny: <reason>",
-- anything else a deny whose reason is the text). Other questions are
-- checked as before.

-- +goose Up
-- +goose StatementBegin
create or replace function public.office_normalize_answer(q public.user_questions, response text) returns text
language plpgsql immutable
set search_path = ''
as $$
declare
  -- Go's unicode.IsSpace, which strings.TrimSpace trims
  ws  constant text := E' \t\n\r\f\v' || U&'\0085\00A0\1680\2000\2001\2002\2003\2004\2005\2006\2007\2008\2009\200A\2028\2029\202F\205F\3000';
  a   text := btrim(response, ws);
  opt text;
begin
  if response is null then
    raise exception 'an answer needs a response' using errcode = '22023';
  end if;
  if octet_length(response) > 65536 then
    raise exception 'the answer is longer than 65536 bytes' using errcode = '22023';
  end if;
  if q.category = 'permission' then
    -- Any text answers a permission request: an option, or a deny with
    -- the reason the agent is told ("deny: not before the release").
    if a = '' then
      raise exception 'the answer is empty' using errcode = '22023',
        hint = 'answer allow once, allow for this session, deny, or "deny: <reason>"';
    end if;
    return a;
  end if;
  if q.question_type in ('selection', 'confirmation') then
    if q.question_type = 'confirmation' then
      case lower(a)
        when 'yes', 'y', 'true', '예', '네' then return 'yes';
        when 'no', 'n', 'false', '아니오', '아니요' then return 'no';
        else null;
      end case;
    end if;
    for opt in select jsonb_array_elements_text(q.options) loop
      if lower(btrim(opt, ws)) = lower(a) then
        return opt;
      end if;
    end loop;
    if q.question_type = 'selection' and jsonb_array_length(q.options) = 0 then
      return a;
    end if;
    if q.question_type = 'confirmation' then
      raise exception '"%" is not yes or no', a using errcode = '22023';
    end if;
    raise exception '"%" is not one of the options', a using errcode = '22023',
      detail = (select string_agg(o, ', ') from jsonb_array_elements_text(q.options) o),
      hint = 'answer with one of the options, as listed in the question''s options';
  end if;
  if a = '' and q.required then
    raise exception 'the answer is empty' using errcode = '22023';
  end if;
  return a;
end
$$;
-- +goose StatementEnd
