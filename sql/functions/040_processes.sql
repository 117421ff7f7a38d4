-- Live processes: each registers, heartbeats, and deregisters on a clean exit; the dispatcher
-- prunes the ones that went silent.

CREATE OR REPLACE FUNCTION pgbus.process_register(
    kind text, hostname text, pid integer, app_revision text DEFAULT NULL, metadata jsonb DEFAULT '{}'
) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO pgbus.processes (kind, hostname, pid, app_revision, metadata)
    VALUES (kind, hostname, pid, app_revision, coalesce(metadata, '{}'))
    RETURNING id
$$;

-- False when the row is gone (pruned while the process was stalled): it should register again.
CREATE OR REPLACE FUNCTION pgbus.process_heartbeat(process_id bigint, metadata jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.processes p
    SET last_heartbeat_at = now(), metadata = coalesce(process_heartbeat.metadata, p.metadata)
    WHERE p.id = process_id;
    RETURN FOUND;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.process_deregister(process_id bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus.processes WHERE id = process_id;
    RETURN FOUND;
END;
$$;
