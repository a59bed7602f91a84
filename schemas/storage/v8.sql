-- Storage schema v8: the 0.4.14 baseline that protocol v9 hosts migrate from.
-- Plan approval in v8 was a structured proposal with request-changes feedback.
-- This file is the published DDL a harness uses to seed a v8 database.
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  workspace_root TEXT,
  mode TEXT NOT NULL DEFAULT 'agent' CHECK (mode IN ('agent', 'plan')),
  permission_mode TEXT NOT NULL DEFAULT 'ask' CHECK (permission_mode IN ('ask', 'accept-edits', 'auto')),
  provider_base_url TEXT,
  model TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE transcript (
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  turn_id TEXT,
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
  content TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX transcript_by_session ON transcript (session_id, id);
CREATE TABLE settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE scheduled_tasks (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  prompt TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('agent', 'plan')),
  workspace_root TEXT,
  provider_base_url TEXT,
  model TEXT,
  permission_mode TEXT NOT NULL DEFAULT 'ask' CHECK (permission_mode IN ('ask', 'accept-edits', 'auto')),
  run_at INTEGER,
  enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
-- plan_approvals.proposal_json holds the v8 structured proposal: one JSON object.
--   {"title": "Add caching", "steps": ["..."], ...}
-- Only "title" is read when migrating to v10: it becomes plan_approvals.title, as text
-- (a value that is not a string is taken as its JSON text; a missing title, or
-- proposal_json that is not JSON, gives ""). The other members (such as "steps" or
-- "proposedCommands") are kept but not read. v8 had no question: v10's question is "".
-- The v10 row keeps the proposal and the request-changes feedback verbatim in
-- legacy_proposal_json, as {"proposal": <proposal_json text>, "feedback": <feedback>};
-- its turn and artifact columns are NULL. Status: pending -> interrupted,
-- changes_requested -> rejected, approved and rejected kept. expires_at is created_at +
-- 30 minutes; decided_at is kept, except that a pending row gets none.
CREATE TABLE plan_approvals (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  proposal_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'changes_requested')),
  feedback TEXT,
  created_at INTEGER NOT NULL,
  decided_at INTEGER
);
PRAGMA user_version = 8;
