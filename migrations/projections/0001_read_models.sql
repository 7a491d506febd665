-- Read models of @assay/projections (<ASSAY_HOME>/projections/read-models.db; docs/projections.md).
-- Derived data only: deleting the file and catching up again rebuilds it byte for byte.

-- One row: the next ledger position to project (everything before it is applied).
CREATE TABLE projection_checkpoint (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  position INTEGER NOT NULL CHECK (position >= 0),
  -- hex SHA-256 of the envelope at position - 1 (null at 0): a different ledger under the same home is noticed.
  last_hash TEXT
);

-- The run fold's state per run (canonical JSON of {run, state, error}): what the next event is folded into.
CREATE TABLE run_slots (
  run TEXT PRIMARY KEY,
  slot TEXT NOT NULL
) WITHOUT ROWID;

-- Leaderboard rows, one per started run, canonical JSON; grouped by (task, task digest, fingerprint).
CREATE TABLE leaderboard_rows (
  run TEXT PRIMARY KEY,
  task TEXT NOT NULL,
  group_key TEXT NOT NULL,
  row TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX leaderboard_rows_task ON leaderboard_rows (task);

-- Run trajectories, one per started run, canonical JSON.
CREATE TABLE trajectories (
  run TEXT PRIMARY KEY,
  trajectory TEXT NOT NULL
) WITHOUT ROWID;
