-- Studio core, agent tables (seed 001), audit log, conversation event log (SPEC decision 4).
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TYPE org_tier AS ENUM ('lite', 'pro', 'elite', 'unmetered');
CREATE TYPE membership_role AS ENUM ('owner', 'admin', 'coach', 'member');
CREATE TYPE membership_status AS ENUM ('active', 'paused', 'cancelled', 'pending');
CREATE TYPE payment_status AS ENUM ('paid', 'due', 'overdue', 'failed', 'none');
CREATE TYPE program_kind AS ENUM ('group', 'coaching', 'feed');

CREATE TABLE organizations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        varchar(255) NOT NULL,
    slug        varchar(255) NOT NULL UNIQUE,
    tier        org_tier NOT NULL DEFAULT 'lite',
    locale      varchar(16) NOT NULL DEFAULT 'en',
    timezone    varchar(64) NOT NULL DEFAULT 'UTC',
    agent_enabled boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email       varchar(320) NOT NULL,
    full_name   varchar(255) NOT NULL,
    locale      varchar(16) NOT NULL DEFAULT 'en',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE memberships (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role            membership_role NOT NULL,
    status          membership_status NOT NULL DEFAULT 'active',
    plan            varchar(64),
    payment_status  payment_status NOT NULL DEFAULT 'none',
    phone           varchar(32),
    joined_at       date NOT NULL DEFAULT current_date,
    last_visit_at   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, user_id)
);
CREATE INDEX memberships_org_role_idx ON memberships (organization_id, role, status);

CREATE TABLE programs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name            varchar(255) NOT NULL,
    description     text,
    kind            program_kind NOT NULL DEFAULT 'group',
    is_active       boolean NOT NULL DEFAULT true,
    deleted_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX programs_org_idx ON programs (organization_id) WHERE deleted_at IS NULL;
CREATE INDEX programs_name_trgm_idx ON programs USING gin (name gin_trgm_ops);

CREATE TABLE audit_logs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    actor_clerk_id  varchar(255) NOT NULL,
    action          varchar(128) NOT NULL,
    resource        varchar(64) NOT NULL,
    resource_id     varchar(255),
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_logs_org_created_idx ON audit_logs (organization_id, created_at DESC);

-- Seed 001 ------------------------------------------------------------------------------------
CREATE TYPE ai_message_role AS ENUM ('user', 'assistant', 'tool_result', 'system_note');
CREATE TYPE ai_tool_status AS ENUM ('pending', 'running', 'succeeded', 'failed', 'rejected_by_user');

CREATE TABLE ai_conversations (
    id                          uuid PRIMARY KEY,
    organization_id             uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id                     uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    membership_id               uuid REFERENCES memberships(id) ON DELETE SET NULL,
    title                       varchar(255),
    pinned                      boolean NOT NULL DEFAULT false,
    archived_at                 timestamptz,
    summary                     text,
    summary_embedding           vector(1024),
    last_message_at             timestamptz NOT NULL DEFAULT now(),
    total_input_tokens          integer NOT NULL DEFAULT 0,
    total_output_tokens         integer NOT NULL DEFAULT 0,
    total_cache_read_tokens     integer NOT NULL DEFAULT 0,
    total_cache_creation_tokens integer NOT NULL DEFAULT 0,
    cost_usd_micros             bigint NOT NULL DEFAULT 0,
    model                       varchar(64) NOT NULL,
    -- Last sequence number of the event log; bumped under the row lock so numbers never repeat.
    last_event_seq              bigint NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_conversations_list_idx ON ai_conversations (organization_id, user_id, last_message_at DESC);
CREATE INDEX ai_conversations_summary_hnsw ON ai_conversations USING hnsw (summary_embedding vector_cosine_ops);

CREATE TABLE ai_messages (
    id                    uuid PRIMARY KEY,
    conversation_id       uuid NOT NULL REFERENCES ai_conversations(id) ON DELETE CASCADE,
    role                  ai_message_role NOT NULL,
    content               jsonb NOT NULL,
    preview               text,
    page_context          jsonb,
    stop_reason           varchar(32),
    input_tokens          integer,
    output_tokens         integer,
    cache_read_tokens     integer,
    cache_creation_tokens integer,
    model                 varchar(64),
    turn_id               uuid,
    -- Position within the conversation; created_at alone cannot order rows written in one instant.
    position              integer NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (conversation_id, position)
);
CREATE INDEX ai_messages_replay_idx ON ai_messages (conversation_id, created_at);

CREATE TABLE ai_tool_executions (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid NOT NULL REFERENCES ai_conversations(id) ON DELETE CASCADE,
    message_id      uuid NOT NULL REFERENCES ai_messages(id) ON DELETE CASCADE,
    tool_use_id     varchar(64) NOT NULL,
    router          varchar(64) NOT NULL,
    action          varchar(64) NOT NULL,
    input           jsonb NOT NULL,
    output          jsonb,
    status          ai_tool_status NOT NULL,
    error_code      varchar(64),
    error_message   text,
    duration_ms     integer,
    resource_id     varchar(255),
    audit_log_id    uuid REFERENCES audit_logs(id),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (conversation_id, tool_use_id)
);
CREATE INDEX ai_tool_executions_resource_idx ON ai_tool_executions (resource_id);
CREATE INDEX ai_tool_executions_replay_idx ON ai_tool_executions (conversation_id, created_at);

CREATE TABLE ai_usage_daily (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id       uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id               uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    day                   date NOT NULL,
    messages              integer NOT NULL DEFAULT 0,
    input_tokens          integer NOT NULL DEFAULT 0,
    output_tokens         integer NOT NULL DEFAULT 0,
    cache_read_tokens     integer NOT NULL DEFAULT 0,
    cache_creation_tokens integer NOT NULL DEFAULT 0,
    cost_usd_micros       bigint NOT NULL DEFAULT 0,
    UNIQUE (organization_id, user_id, day)
);

CREATE TABLE ai_cache (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    model       varchar(100) NOT NULL,
    input_hash  varchar(64) NOT NULL,
    operation   varchar(50) NOT NULL,
    result      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE INDEX ai_cache_lookup_idx ON ai_cache (model, input_hash);

-- Turns and the event log ------------------------------------------------------------------------
CREATE TYPE ai_turn_status AS ENUM ('running', 'suspended', 'completed', 'failed', 'aborted');

CREATE TABLE ai_turns (
    id              uuid PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES ai_conversations(id) ON DELETE CASCADE,
    command_id      varchar(64) NOT NULL UNIQUE,
    kind            varchar(16) NOT NULL DEFAULT 'send',
    status          ai_turn_status NOT NULL DEFAULT 'running',
    error_code      varchar(64),
    input_tokens          integer NOT NULL DEFAULT 0,
    output_tokens         integer NOT NULL DEFAULT 0,
    cache_read_tokens     integer NOT NULL DEFAULT 0,
    cache_creation_tokens integer NOT NULL DEFAULT 0,
    cost_usd_micros       bigint NOT NULL DEFAULT 0,
    model_calls     integer NOT NULL DEFAULT 0,
    attempts        integer NOT NULL DEFAULT 1,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX ai_turns_conversation_idx ON ai_turns (conversation_id, started_at);

CREATE TABLE ai_conversation_events (
    conversation_id uuid NOT NULL REFERENCES ai_conversations(id) ON DELETE CASCADE,
    seq             bigint NOT NULL,
    turn_id         uuid NOT NULL,
    type            varchar(32) NOT NULL,
    -- json, not jsonb: the SSE payload is replayed byte-for-byte, key order included.
    data            json NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, seq)
);
