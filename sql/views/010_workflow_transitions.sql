-- The one transition table of workflow runs: for each kind of verb (runner: said by a step
-- from inside its attempt; outside: said by an operator, the app or an agent), the verb, the
-- run status it is legal in, and the status it leads to. A (kind, verb, status) that is not
-- here is refused with code 'not_allowed'. Every transition function consults it under the
-- run's row lock, and `pgbus.workflow_available_actions` is a query on it.
--
-- Runner verbs on a paused run: the operator paused it while the step ran; the step's end is
-- recorded and honoured, but nothing is scheduled until `resume`.
-- 'complete', 'skip' and 'resolve' lead to 'ready' when a next step exists and to 'finished'
-- otherwise.
--
-- Waiting steps: a step parks ('park'; 'rewait' when a woken step finds nothing it takes and
-- parks again, keeping its deadline) at a signal gate or on a fan-out batch; a signal for the
-- gate wakes it ('wake': the attempt is sent again), the batch's end resolves it ('resolve').
-- An outside 'signal' is taken in every ongoing status (early ones wait as pending) and leaves
-- the status as it is; the 'wake' it may cause is its own transition. 'resume' of a run paused
-- while its step waited leads back to 'waiting' (and wakes or resolves it when what it waited
-- for came meanwhile). 'skip' from outside skips the step a waiting run waits on.
CREATE OR REPLACE VIEW pgbus.workflow_transitions (kind, verb, from_status, to_status) AS
VALUES
    ('runner',  'complete',   'running',   'ready'),
    ('runner',  'skip',       'running',   'ready'),
    ('runner',  'reattempt',  'running',   'ready'),
    ('runner',  'pause',      'running',   'paused'),
    ('runner',  'cancel',     'running',   'cancelled'),
    ('runner',  'finished',   'running',   'finished'),
    ('runner',  'complete',   'paused',    'paused'),
    ('runner',  'skip',       'paused',    'paused'),
    ('runner',  'reattempt',  'paused',    'paused'),
    ('runner',  'pause',      'paused',    'paused'),
    ('runner',  'cancel',     'paused',    'cancelled'),
    ('runner',  'finished',   'paused',    'finished'),
    ('runner',  'park',       'running',   'waiting'),
    ('runner',  'park',       'paused',    'paused'),
    ('runner',  'rewait',     'running',   'waiting'),
    ('runner',  'rewait',     'paused',    'paused'),
    ('runner',  'wake',       'waiting',   'ready'),
    ('runner',  'resolve',    'waiting',   'ready'),
    ('outside', 'pause',      'ready',     'paused'),
    ('outside', 'pause',      'running',   'paused'),
    ('outside', 'pause',      'waiting',   'paused'),
    ('outside', 'cancel',     'ready',     'cancelled'),
    ('outside', 'cancel',     'running',   'cancelled'),
    ('outside', 'cancel',     'waiting',   'cancelled'),
    ('outside', 'cancel',     'paused',    'cancelled'),
    ('outside', 'resume',     'paused',    'ready'),
    ('outside', 'resume_at',  'paused',    'ready'),
    ('outside', 'run_now',    'ready',     'ready'),
    ('outside', 'reschedule', 'ready',     'ready'),
    ('outside', 'skip',       'waiting',   'ready'),
    ('outside', 'signal',     'ready',     'ready'),
    ('outside', 'signal',     'running',   'running'),
    ('outside', 'signal',     'waiting',   'waiting'),
    ('outside', 'signal',     'paused',    'paused'),
    ('outside', 'rerun',      'finished',  'finished'),
    ('outside', 'rerun',      'cancelled', 'cancelled');
