-- Settings SQL reads (pgbus.settings) and the limits every caller meets, whatever its
-- language: payload sizes, actor and reason lengths. A limit broken raises a named SQLSTATE:
-- PB413 (a payload too large), 22023 invalid_parameter_value (an actor or reason too long, an
-- unknown setting or a wrong value), as for every other malformed input.

-- A setting's value (NULL when there is no such setting).
CREATE OR REPLACE FUNCTION pgbus.setting(name text)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT s.value FROM pgbus.settings s WHERE s.name = setting.name
$$;

-- Changes a setting (the known ones only, each checked); answers the new value.
CREATE OR REPLACE FUNCTION pgbus.setting_set(name text, value jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    lowest integer := CASE name WHEN 'workflow_max_payload_size' THEN 256
                                WHEN 'actor_max_length' THEN 1 WHEN 'reason_max_length' THEN 1 END;
    highest integer := CASE name WHEN 'actor_max_length' THEN 255 WHEN 'reason_max_length' THEN 1000
                                 ELSE 2147483647 END;
BEGIN
    IF lowest IS NULL THEN
        RAISE EXCEPTION 'pgbus: unknown setting %', quote_nullable(name)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'settings: workflow_max_payload_size, actor_max_length, reason_max_length';
    END IF;
    IF jsonb_typeof(value) IS DISTINCT FROM 'number' OR value::numeric <> trunc(value::numeric)
       OR value::numeric NOT BETWEEN lowest AND highest THEN
        RAISE EXCEPTION 'pgbus: setting % is a whole number from % to %, got %', name, lowest, highest, value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgbus.settings AS s (name, value) VALUES (setting_set.name, setting_set.value)
    ON CONFLICT ON CONSTRAINT settings_pkey DO UPDATE SET value = excluded.value, updated_at = now();
    RETURN value;
END;
$$;

-- The payload limit, for any caller that checks before it writes (Python does, to pause a run
-- whose step output is too large instead of failing the step's end).
CREATE OR REPLACE FUNCTION pgbus.workflow_max_payload_size()
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((pgbus.setting('workflow_max_payload_size'))::integer, 65536)
$$;

-- The trigger on arguments, outputs and signal payloads: TG_ARGV[0] is the column, [1] what
-- it holds, for the message.
CREATE OR REPLACE FUNCTION pgbus.limit_payload_size()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    size integer := octet_length((to_jsonb(NEW) -> TG_ARGV[0])::text);
    max_size integer := pgbus.workflow_max_payload_size();
BEGIN
    IF size > max_size THEN
        RAISE EXCEPTION 'pgbus: %: % bytes, more than workflow_max_payload_size (%)', TG_ARGV[1], size, max_size
            USING ERRCODE = 'PB413',
                  HINT = 'raise it with SELECT pgbus.setting_set(''workflow_max_payload_size'', ''<bytes>'')';
    END IF;
    RETURN NEW;
END;
$$;

-- Raises 22023 when an actor or a reason is longer than its setting allows (255 and 1000
-- characters unless changed lower).
CREATE OR REPLACE FUNCTION pgbus.check_actor_reason(actor text, reason text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    actor_max integer;
    reason_max integer;
BEGIN
    IF actor IS NULL AND reason IS NULL THEN
        RETURN;
    END IF;
    actor_max := coalesce((pgbus.setting('actor_max_length'))::integer, 255);
    reason_max := coalesce((pgbus.setting('reason_max_length'))::integer, 1000);
    IF length(actor) > actor_max THEN
        RAISE EXCEPTION 'pgbus: an actor is at most % characters, got %', actor_max, length(actor)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(reason) > reason_max THEN
        RAISE EXCEPTION 'pgbus: a reason is at most % characters, got %', reason_max, length(reason)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
