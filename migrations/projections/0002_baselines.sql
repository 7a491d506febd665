-- Matched baselines (BaselineRecorded in `baseline-<task>`, docs/task-format.md "Baselines"), one row per event by
-- its ledger position: canonical JSON of the parsed baseline. Leaderboards show a protocol group's latest `start`
-- and `oracle` baselines and compare every run of the group with the `start` one.
CREATE TABLE baselines (
  position INTEGER PRIMARY KEY CHECK (position >= 0),
  task TEXT NOT NULL,
  baseline TEXT NOT NULL
);
CREATE INDEX baselines_task ON baselines (task);

-- Read models projected before this table existed skipped every BaselineRecorded: start them over from position 0
-- (derived data; the next catch-up rebuilds everything from the verified ledger).
DELETE FROM run_slots;
DELETE FROM leaderboard_rows;
DELETE FROM trajectories;
UPDATE projection_checkpoint SET position = 0, last_hash = NULL WHERE id = 1;
