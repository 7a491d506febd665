-- Imported result bundles (`assay bundle import`, docs/projections.md "Imported bundles"): one row per bundle file
-- that verified against its publisher's key, by the file's SHA-256. `row` is the canonical JSON of the leaderboard row
-- its verified claim supports (source "imported"). This file is the record of what was imported: it is not derived
-- from the ledger, so rebuilding the read models leaves it alone. The bundle files themselves are kept beside it.
CREATE TABLE imports (
  bundle_digest TEXT PRIMARY KEY CHECK (bundle_digest GLOB 'sha256:*' AND length(bundle_digest) = 71),
  task TEXT NOT NULL,
  run TEXT NOT NULL,
  publisher_key TEXT NOT NULL,
  imported_at TEXT NOT NULL,
  row TEXT NOT NULL
);
CREATE INDEX imports_task ON imports (task);
