-- The keyset cursor of the run list at a numbered page: the (created_at, workflow_id) of the
-- run `skip` rows into pgbus.workflow_list for the same filters (its WHERE clause,
-- pgbus.workflow_list_where, and its order), so a caller that pages by number (the MCP tools)
-- lands on row `skip` + 1 by passing it as before_created/before_id, after one narrow index
-- scan instead of building every earlier row. No row when skip < 1 (the first page needs no
-- cursor) or fewer runs match. Filter errors are workflow_list's (22023).
CREATE OR REPLACE FUNCTION pgbus.workflow_list_cursor(
    skip integer,
    only_status text DEFAULT 'ongoing',
    only_class text DEFAULT NULL,
    only_step text DEFAULT NULL,
    only_error_class text DEFAULT NULL,
    only_subject_type text DEFAULT NULL,
    only_subject_id text DEFAULT NULL,
    only_run uuid DEFAULT NULL,
    created_from timestamptz DEFAULT NULL,
    created_to timestamptz DEFAULT NULL,
    ended_from timestamptz DEFAULT NULL,
    ended_to timestamptz DEFAULT NULL
) RETURNS TABLE (before_created timestamptz, before_id uuid)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text;
BEGIN
    q := 'SELECT w.created_at, w.workflow_id FROM pgbus.workflows w'
         || pgbus.workflow_list_where(only_status, only_class, only_step, only_error_class, only_subject_type,
                                      only_subject_id, only_run, created_from, created_to, ended_from,
                                      ended_to, NULL, NULL)
         || ' ORDER BY w.created_at DESC, w.workflow_id DESC OFFSET $14 - 1 LIMIT 1';
    IF skip IS NULL OR skip < 1 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE q
        USING only_status, only_class, only_step, only_error_class, only_subject_type, only_subject_id,
              only_run, created_from, created_to, ended_from, ended_to, NULL::timestamptz,
              NULL::uuid, skip;
END;
$$;
