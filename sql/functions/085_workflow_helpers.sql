-- Small shared rules of the workflow functions.

-- An idempotency key as stored: without whitespace at either end, and NULL when nothing else
-- is left (a key of spaces, tabs or newlines is no key). Used for start and signal keys.
CREATE OR REPLACE FUNCTION pgbus.idempotency_key(key text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT nullif(regexp_replace(key, '^[[:space:]]+|[[:space:]]+$', '', 'g'), '')
$$;
