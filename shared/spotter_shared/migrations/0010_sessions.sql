-- Seed 004: one execution record for agent and human work. A session has a type (fixed at
-- creation) and a status (moved only along the status machine, enforced by the orchestrator's
-- sessions module); its events are an append-only log numbered per session by the server.
CREATE TYPE session_type AS ENUM ('agent', 'response', 'tool', 'mixed');
CREATE TYPE session_status AS ENUM (
    'draft', 'pending', 'running', 'completed', 'failed', 'waiting_human', 'awaiting_tool', 'idle',
    'expired', 'abandoned'
);

CREATE TABLE sessions (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id         uuid REFERENCES users(id) ON DELETE SET NULL,
    session_type    session_type NOT NULL,
    status          session_status NOT NULL DEFAULT 'draft',
    -- who opened it: 'human' (the activity bridge), 'coach', 'operator', …
    source          varchar(32) NOT NULL,
    task_id         uuid REFERENCES tasks(id) ON DELETE SET NULL,
    title           text,
    started_at      timestamptz,
    completed_at    timestamptz,
    error_message   text,
    usage           jsonb NOT NULL DEFAULT '{}'::jsonb,
    cost_usd_micros bigint NOT NULL DEFAULT 0,
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- the last event's sequence: appenders lock the row and number their events after it
    last_sequence   bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_by_owner_idx ON sessions (organization_id, session_type, user_id, created_at DESC);
-- One running human session per user per organization, held by the database itself.
CREATE UNIQUE INDEX sessions_one_active_human ON sessions (organization_id, user_id)
    WHERE source = 'human' AND status = 'running';
CREATE TRIGGER sessions_touch BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

CREATE TABLE session_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id        uuid NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    sequence          bigint NOT NULL CHECK (sequence > 0),
    event_type        varchar(64) NOT NULL,
    role              varchar(16) NOT NULL CHECK (role IN ('user', 'agent', 'system')),
    content           jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(content) = 'array'),
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    thread_id         varchar(64),
    external_event_id varchar(255),
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, sequence)
);
CREATE UNIQUE INDEX session_events_external_idx ON session_events (session_id, external_event_id)
    WHERE external_event_id IS NOT NULL;

-- Append-only: an event is never changed, and never deleted except with its session.
CREATE FUNCTION session_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 THEN
        RETURN OLD;  -- cascaded from its session (or its organization)
    END IF;
    RAISE EXCEPTION 'session_events is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER session_events_append_only BEFORE UPDATE OR DELETE ON session_events
    FOR EACH ROW EXECUTE FUNCTION session_events_append_only();
