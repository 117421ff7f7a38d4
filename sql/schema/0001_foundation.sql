-- pgbus's own bookkeeping: facts about this install (the PGMQ SQL version pgbus installed,
-- the digest of the functions and views last applied).
CREATE TABLE pgbus.meta (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
