-- Re-judges recorded in this ledger (RejudgeCompleted, written by `assay rejudge` into `rejudge-<id>`), one row per
-- event by its ledger position: canonical JSON of the parsed re-judge (libs/projections domain/reports.ts). The
-- reproducibility report lists a run's re-judges; a leaderboard row shows the latest re-judge of its best snapshot.
CREATE TABLE rejudges (
  position INTEGER PRIMARY KEY CHECK (position >= 0),
  run TEXT NOT NULL,
  rejudge TEXT NOT NULL
);
CREATE INDEX rejudges_run ON rejudges (run);

-- Read models projected before this table existed skipped every RejudgeCompleted: start them over from position 0
-- (derived data; the next catch-up rebuilds everything from the verified ledger).
DELETE FROM run_slots;
DELETE FROM leaderboard_rows;
DELETE FROM trajectories;
DELETE FROM baselines;
UPDATE projection_checkpoint SET position = 0, last_hash = NULL WHERE id = 1;
