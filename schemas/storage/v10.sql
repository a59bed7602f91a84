-- Storage schema v10 (ADR 0053 §7), as created on an empty data directory.
-- Times are epoch milliseconds. The host's boot epoch is deliberately absent (§4).
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  workspace_root TEXT,
  mode TEXT NOT NULL DEFAULT 'agent' CHECK (mode IN ('agent', 'plan')),
  permission_mode TEXT NOT NULL DEFAULT 'ask' CHECK (permission_mode IN ('ask', 'accept-edits', 'auto')),
  provider_base_url TEXT,
  model TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
, shell_id TEXT);
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
-- The single plan checkpoint table (§4): approval status and execution fields in one row.
-- Rows migrated from v8 keep their proposal in legacy_proposal_json and have no artifact.
CREATE TABLE "plan_approvals" (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  turn_id TEXT,
  title TEXT NOT NULL,
  question TEXT NOT NULL,
  artifact_path TEXT,
  artifact_sha256 TEXT CHECK (artifact_sha256 IS NULL OR (length(artifact_sha256) = 64 AND artifact_sha256 NOT GLOB '*[^0-9a-f]*')),
  artifact_bytes INTEGER CHECK (artifact_bytes IS NULL OR artifact_bytes >= 0),
  legacy_proposal_json TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'interrupted')),
  status_code TEXT,
  decided_at INTEGER,
  permission_mode TEXT CHECK (permission_mode IS NULL OR permission_mode IN ('ask', 'accept-edits', 'auto')),
  execution_id TEXT UNIQUE,
  execution_state TEXT CHECK (execution_state IS NULL OR execution_state IN ('queued', 'running', 'completed', 'interrupted')),
  execution_turn_id TEXT,
  CHECK (legacy_proposal_json IS NOT NULL OR (turn_id IS NOT NULL AND artifact_path IS NOT NULL AND artifact_sha256 IS NOT NULL AND artifact_bytes IS NOT NULL)),
  CHECK (status = 'approved' OR permission_mode IS NULL),
  CHECK ((execution_id IS NULL) = (execution_state IS NULL)),
  CHECK (execution_id IS NULL OR permission_mode IS NOT NULL)
);
CREATE UNIQUE INDEX plan_approvals_one_pending ON plan_approvals (session_id) WHERE status = 'pending';
CREATE UNIQUE INDEX plan_approvals_one_active_execution ON plan_approvals (session_id) WHERE execution_state IN ('queued', 'running');
-- Turns, so that startup recovery can abort the turns a previous process left active (§4).
CREATE TABLE turns (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  kind TEXT NOT NULL CHECK (kind IN ('prompt', 'execution', 'scheduled')),
  state TEXT NOT NULL CHECK (state IN ('active', 'completed', 'failed', 'cancelled', 'interrupted')),
  started_at INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE state = 'active';
-- Audit of every shell command (§7 shell selection and streamed output).
CREATE TABLE command_audit (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  turn_id TEXT,
  shell_id TEXT NOT NULL,
  shell_path TEXT NOT NULL,
  command TEXT NOT NULL,
  cwd TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  exit_code INTEGER,
  signal INTEGER,
  timed_out INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
  cancelled INTEGER NOT NULL DEFAULT 0 CHECK (cancelled IN (0, 1)),
  truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
  duration_ms INTEGER
);
CREATE TABLE scheduled_task_runs (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  session_id TEXT,
  started_at INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('running', 'completed', 'failed', 'refused')),
  error_code TEXT,
  error_message TEXT
);
CREATE INDEX scheduled_task_runs_by_task ON scheduled_task_runs (task_id, started_at);
-- The persisted default shell lives in settings under key 'default_shell_id' (§7).
PRAGMA user_version = 10;
