-- An attempt is begun when its message is read (status 'running', started_at), but it is in
-- progress only once its body runs: body_started_at. A message that comes back while its
-- attempt is 'running' is a stall (the worker died) only when the body had started; one read
-- ahead and never started simply runs.
ALTER TABLE pgbus.workflow_steps ADD COLUMN body_started_at timestamptz;
-- Attempts running when this is applied keep the old meaning: begun is started.
UPDATE pgbus.workflow_steps SET body_started_at = started_at WHERE status = 'running';
