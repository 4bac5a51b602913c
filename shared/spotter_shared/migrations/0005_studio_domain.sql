-- The rest of the studio the agent works on (seed 000's routers): the exercise library, personal
-- assignments and workout comments, the class timetable with bookings and attendance, plans and
-- payments, program templates, and forms. Times are timestamptz (UTC); the organization's time zone
-- (organizations.timezone) is applied when they are read or written.

-- Members leave: growth and churn need the day.
ALTER TABLE memberships ADD COLUMN ended_on date;
ALTER TABLE memberships ADD CONSTRAINT memberships_ended_after_joined CHECK (ended_on IS NULL OR ended_on >= joined_at);

-- Exercise library ---------------------------------------------------------------------------------
CREATE TYPE exercise_modality AS ENUM ('weightlifting', 'gymnastics', 'monostructural', 'strongman', 'mobility', 'other');

-- organization_id NULL: the global library every studio sees; otherwise the studio's own entries.
CREATE TABLE exercises (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid REFERENCES organizations(id) ON DELETE CASCADE,
    name            varchar(255) NOT NULL,
    aliases         text[] NOT NULL DEFAULT '{}',
    equipment       text[] NOT NULL DEFAULT '{}',
    muscles         text[] NOT NULL DEFAULT '{}',
    modality        exercise_modality NOT NULL DEFAULT 'other',
    description     text,
    embedding       vector(384),
    deleted_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX exercises_scope_name_key ON exercises
    (coalesce(organization_id, '00000000-0000-0000-0000-000000000000'::uuid), lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX exercises_name_trgm_idx ON exercises USING gin (name gin_trgm_ops);
CREATE INDEX exercises_aliases_idx ON exercises USING gin (aliases);

ALTER TABLE workout_movements ADD COLUMN exercise_id uuid REFERENCES exercises(id) ON DELETE SET NULL;

-- Personal (1-on-1) assignments and comments ----------------------------------------------------------
CREATE TABLE assignments (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id     uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    membership_id       uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    coach_membership_id uuid REFERENCES memberships(id) ON DELETE SET NULL,
    program_id          uuid REFERENCES programs(id) ON DELETE SET NULL,
    workout_id          uuid REFERENCES workouts(id) ON DELETE SET NULL,
    title               varchar(255) NOT NULL,
    notes               text,
    scheduled_for       date NOT NULL,
    published           boolean NOT NULL DEFAULT false,
    published_at        timestamptz,
    created_by          uuid REFERENCES users(id) ON DELETE SET NULL,
    deleted_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX assignments_org_day_idx ON assignments (organization_id, scheduled_for) WHERE deleted_at IS NULL;
CREATE INDEX assignments_member_idx ON assignments (membership_id, scheduled_for) WHERE deleted_at IS NULL;

-- A comment is on a program's workout or on a personal assignment.
CREATE TABLE workout_comments (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id      uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workout_id           uuid REFERENCES workouts(id) ON DELETE CASCADE,
    assignment_id        uuid REFERENCES assignments(id) ON DELETE CASCADE,
    author_membership_id uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    body                 text NOT NULL,
    deleted_at           timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (workout_id IS NOT NULL OR assignment_id IS NOT NULL)
);
CREATE INDEX workout_comments_workout_idx ON workout_comments (workout_id, created_at) WHERE deleted_at IS NULL;
CREATE INDEX workout_comments_assignment_idx ON workout_comments (assignment_id, created_at) WHERE deleted_at IS NULL;

-- Read state per coach: a row means this coach has read that comment.
CREATE TABLE workout_comment_reads (
    comment_id          uuid NOT NULL REFERENCES workout_comments(id) ON DELETE CASCADE,
    coach_membership_id uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    read_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (comment_id, coach_membership_id)
);

-- Timetable, bookings, attendance -------------------------------------------------------------------
CREATE TABLE class_types (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id  uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    program_id       uuid REFERENCES programs(id) ON DELETE SET NULL,
    name             varchar(255) NOT NULL,
    description      text,
    default_capacity integer NOT NULL DEFAULT 12 CHECK (default_capacity > 0),
    duration_min     integer NOT NULL DEFAULT 60 CHECK (duration_min > 0),
    deleted_at       timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX class_types_org_name_key ON class_types (organization_id, lower(name)) WHERE deleted_at IS NULL;

CREATE TABLE class_sessions (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id     uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    class_type_id       uuid NOT NULL REFERENCES class_types(id) ON DELETE RESTRICT,
    coach_membership_id uuid REFERENCES memberships(id) ON DELETE SET NULL,
    starts_at           timestamptz NOT NULL,
    ends_at             timestamptz NOT NULL,
    capacity            integer NOT NULL CHECK (capacity > 0),
    published           boolean NOT NULL DEFAULT false,
    cancelled_at        timestamptz,
    cancel_reason       text,
    notes               text,
    created_by          uuid REFERENCES users(id) ON DELETE SET NULL,
    deleted_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);
CREATE INDEX class_sessions_org_start_idx ON class_sessions (organization_id, starts_at) WHERE deleted_at IS NULL;
CREATE INDEX class_sessions_type_idx ON class_sessions (class_type_id, starts_at) WHERE deleted_at IS NULL;

CREATE TYPE booking_status AS ENUM ('booked', 'cancelled', 'waitlisted');

-- checked_in_at set: the member attended.
CREATE TABLE bookings (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    session_id    uuid NOT NULL REFERENCES class_sessions(id) ON DELETE CASCADE,
    membership_id uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    status        booking_status NOT NULL DEFAULT 'booked',
    booked_at     timestamptz NOT NULL DEFAULT now(),
    checked_in_at timestamptz,
    UNIQUE (session_id, membership_id)
);
CREATE INDEX bookings_member_idx ON bookings (membership_id, booked_at);

-- Plans and payments (the studio's revenue; not the agent's AI spend) ---------------------------------
CREATE TYPE plan_interval AS ENUM ('month', 'year', 'once');
CREATE TYPE studio_payment_status AS ENUM ('paid', 'failed', 'refunded', 'pending');

CREATE TABLE plans (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id   uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name              varchar(64) NOT NULL,
    price_cents       integer NOT NULL CHECK (price_cents >= 0),
    currency          char(3) NOT NULL DEFAULT 'USD',
    billing_interval  plan_interval NOT NULL DEFAULT 'month',
    sessions_per_week integer CHECK (sessions_per_week > 0),
    is_active         boolean NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);

-- Which plan a member is (or was) on; memberships.plan keeps the current plan's name.
CREATE TABLE member_plans (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    membership_id uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    plan_id       uuid NOT NULL REFERENCES plans(id) ON DELETE RESTRICT,
    started_on    date NOT NULL,
    ended_on      date,
    CHECK (ended_on IS NULL OR ended_on >= started_on)
);
CREATE INDEX member_plans_membership_idx ON member_plans (membership_id, started_on);

CREATE TABLE payments (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    plan_id         uuid REFERENCES plans(id) ON DELETE SET NULL,
    amount_cents    integer NOT NULL CHECK (amount_cents >= 0),
    currency        char(3) NOT NULL DEFAULT 'USD',
    status          studio_payment_status NOT NULL,
    due_on          date NOT NULL,
    paid_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_org_paid_idx ON payments (organization_id, paid_at);
CREATE INDEX payments_member_idx ON payments (membership_id, due_on);

-- Program templates --------------------------------------------------------------------------------
CREATE TABLE program_templates (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name            varchar(255) NOT NULL,
    description     text,
    program_kind    program_kind NOT NULL DEFAULT 'group',
    created_by      uuid REFERENCES users(id) ON DELETE SET NULL,
    deleted_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX program_templates_org_name_key ON program_templates (organization_id, lower(name)) WHERE deleted_at IS NULL;

-- A template's workouts, by day from the start (0 = the first day); sections as the workouts tools take them.
CREATE TABLE program_template_workouts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    template_id uuid NOT NULL REFERENCES program_templates(id) ON DELETE CASCADE,
    day_offset  integer NOT NULL CHECK (day_offset >= 0),
    title       varchar(255) NOT NULL,
    description text,
    sections    jsonb NOT NULL DEFAULT '[]'::jsonb,
    UNIQUE (template_id, day_offset, title)
);

-- Forms --------------------------------------------------------------------------------------------
CREATE TYPE form_assignment_status AS ENUM ('pending', 'completed', 'expired');

-- type_key groups forms for compliance (e.g. waiver, par_q, health_update): a member is compliant
-- for a type when their latest assignment of that type is completed and not expired.
CREATE TABLE forms (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    type_key        varchar(64) NOT NULL,
    title           varchar(255) NOT NULL,
    required        boolean NOT NULL DEFAULT true,
    valid_days      integer CHECK (valid_days > 0),
    deleted_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX forms_org_type_idx ON forms (organization_id, type_key) WHERE deleted_at IS NULL;

CREATE TABLE form_assignments (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    form_id         uuid NOT NULL REFERENCES forms(id) ON DELETE CASCADE,
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    status          form_assignment_status NOT NULL DEFAULT 'pending',
    assigned_at     timestamptz NOT NULL DEFAULT now(),
    due_on          date,
    completed_at    timestamptz
);
CREATE INDEX form_assignments_org_status_idx ON form_assignments (organization_id, status);
CREATE INDEX form_assignments_member_idx ON form_assignments (membership_id, assigned_at);
