-- What the agent's write routers change (seed 000: workouts, programs.enroll_member, tasks).
-- Rows are soft-deleted (deleted_at) so that an undo or an audit trail can still point at them.

CREATE TYPE workout_kind AS ENUM ('freeform', 'structured');
CREATE TYPE task_status AS ENUM ('open', 'done');

CREATE TABLE workouts (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    program_id      uuid REFERENCES programs(id) ON DELETE SET NULL,
    title           varchar(255) NOT NULL,
    description     text,
    kind            workout_kind NOT NULL DEFAULT 'freeform',
    scheduled_for   date,
    created_by      uuid REFERENCES users(id) ON DELETE SET NULL,
    deleted_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workouts_org_scheduled_idx ON workouts (organization_id, scheduled_for) WHERE deleted_at IS NULL;
CREATE INDEX workouts_program_idx ON workouts (program_id) WHERE deleted_at IS NULL;

-- Sections and movements are replaced wholesale (workouts.set_sections), never patched one by one.
CREATE TABLE workout_sections (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workout_id  uuid NOT NULL REFERENCES workouts(id) ON DELETE CASCADE,
    position    integer NOT NULL,
    name        varchar(255) NOT NULL,
    format      varchar(64),  -- e.g. "3 rounds", "AMRAP 12", "EMOM 10"
    notes       text,
    UNIQUE (workout_id, position)
);

CREATE TABLE workout_movements (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    section_id  uuid NOT NULL REFERENCES workout_sections(id) ON DELETE CASCADE,
    position    integer NOT NULL,
    name        varchar(255) NOT NULL,
    reps        integer CHECK (reps > 0),
    distance_m  integer CHECK (distance_m > 0),
    load_kg     numeric(7, 2) CHECK (load_kg >= 0),
    duration_s  integer CHECK (duration_s > 0),
    notes       text,
    UNIQUE (section_id, position)
);

CREATE TABLE program_enrollments (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    program_id    uuid NOT NULL REFERENCES programs(id) ON DELETE CASCADE,
    membership_id uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    enrolled_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, membership_id)
);
CREATE INDEX program_enrollments_membership_idx ON program_enrollments (membership_id);

CREATE TABLE tasks (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id        uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    title                  varchar(255) NOT NULL,
    description            text,
    due_date               date,
    assignee_membership_id uuid REFERENCES memberships(id) ON DELETE SET NULL,
    status                 task_status NOT NULL DEFAULT 'open',
    completed_at           timestamptz,
    created_by             uuid REFERENCES users(id) ON DELETE SET NULL,
    deleted_at             timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_org_status_idx ON tasks (organization_id, status) WHERE deleted_at IS NULL;
