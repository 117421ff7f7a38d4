-- Settings SQL reads (the limits every caller meets, from any language), and the limits
-- themselves: payload sizes through triggers, actor and reason lengths through checks.
CREATE TABLE pgbus.settings (
    name       text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pgbus.settings (name, value) VALUES
    ('workflow_max_payload_size', '65536'),  -- bytes of arguments, an output, a signal's payload
    ('actor_max_length', '255'),             -- characters of an actor
    ('reason_max_length', '1000');           -- characters of a reason

-- Placeholders so that the triggers can be made here; sql/functions/130_limits.sql holds the
-- bodies (re-applied on every migrate that finds them changed).
CREATE OR REPLACE FUNCTION pgbus.limit_payload_size() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; $$;

-- A payload of at most 255 bytes never reaches the function: the smallest limit allowed is
-- 256, and the step's end on the hot path mostly stores small outputs.
CREATE TRIGGER workflows_arguments_size
    BEFORE INSERT OR UPDATE OF arguments ON pgbus.workflows
    FOR EACH ROW WHEN (octet_length(NEW.arguments::text) > 255)
    EXECUTE FUNCTION pgbus.limit_payload_size('arguments', 'the workflow''s arguments');
CREATE TRIGGER workflow_steps_output_size
    BEFORE INSERT OR UPDATE OF output ON pgbus.workflow_steps
    FOR EACH ROW WHEN (octet_length(NEW.output::text) > 255)
    EXECUTE FUNCTION pgbus.limit_payload_size('output', 'the step''s output');
CREATE TRIGGER workflow_signals_payload_size
    BEFORE INSERT OR UPDATE OF payload ON pgbus.workflow_signals
    FOR EACH ROW WHEN (octet_length(NEW.payload::text) > 255)
    EXECUTE FUNCTION pgbus.limit_payload_size('payload', 'the signal''s payload');

-- The backstop for actor and reason (the entry points check them first, with a clearer
-- error). NOT VALID: rows written before this migration stay as they are.
ALTER TABLE pgbus.workflow_events
    ADD CONSTRAINT workflow_events_actor_length CHECK (length(actor) <= 255) NOT VALID,
    ADD CONSTRAINT workflow_events_reason_length CHECK (length(reason) <= 1000) NOT VALID;
ALTER TABLE pgbus.workflow_signals
    ADD CONSTRAINT workflow_signals_actor_length CHECK (length(actor) <= 255) NOT VALID,
    ADD CONSTRAINT workflow_signals_reason_length CHECK (length(reason) <= 1000) NOT VALID;
