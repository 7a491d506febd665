-- 0001: the embedded ledger (forward-only; never edit once released, add a new numbered file instead).
-- The migration runner wraps this file in one transaction and records it in schema_version.

-- Every envelope, in global order. `bytes` are the exact wire bytes (canonical JSON of the signed envelope),
-- `hash` = SHA-256(bytes), which is the `prev` (hex) of the next event in the same stream.
CREATE TABLE events (
  position INTEGER PRIMARY KEY CHECK (position >= 0),
  stream   TEXT    NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  id       TEXT    NOT NULL UNIQUE,
  type     TEXT    NOT NULL,
  bytes    BLOB    NOT NULL,
  hash     BLOB    NOT NULL CHECK (length(hash) = 32),
  UNIQUE (stream, revision)
);

-- Hashes of the perfect subtrees of the RFC 9162 log over all envelopes; node (level, idx) covers leaves
-- [idx * 2^level, (idx + 1) * 2^level). Derived state: can be rebuilt from events.
CREATE TABLE merkle_nodes (
  level INTEGER NOT NULL CHECK (level >= 0 AND level < 64),
  idx   INTEGER NOT NULL CHECK (idx >= 0),
  hash  BLOB    NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (level, idx)
) WITHOUT ROWID;

-- Signed checkpoints the ledger has issued, in issue order (remembered across restarts so the ledger never signs
-- a smaller or inconsistent one). root_hash: standard base64 as in the note; note: the complete signed note.
CREATE TABLE checkpoints (
  seq       INTEGER PRIMARY KEY CHECK (seq >= 0),
  tree_size INTEGER NOT NULL CHECK (tree_size >= 0),
  root_hash TEXT    NOT NULL,
  note      TEXT    NOT NULL
);
