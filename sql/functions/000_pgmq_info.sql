-- How PGMQ is installed in this database and at which version: 'extension' (CREATE EXTENSION),
-- 'sql' (the extension-free SQL script) or 'missing'. The version of a SQL install is known
-- only when pgbus installed it.
CREATE OR REPLACE FUNCTION pgbus.pgmq_info(OUT installed_as text, OUT version text)
LANGUAGE sql STABLE AS $$
    SELECT CASE
               WHEN e.extversion IS NOT NULL THEN 'extension'
               WHEN to_regnamespace('pgmq') IS NULL THEN 'missing'
               ELSE 'sql'
           END,
           coalesce(e.extversion,
                    CASE WHEN to_regnamespace('pgmq') IS NOT NULL
                         THEN (SELECT m.value FROM pgbus.meta m WHERE m.key = 'pgmq_sql_version')
                    END)
    FROM (SELECT 1) AS one
    LEFT JOIN pg_extension e ON e.extname = 'pgmq'
$$;
