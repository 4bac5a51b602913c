-- Seed 003: the member coach's data. Each row belongs to one studio membership (a person who trains
-- at two studios has two coaches that know nothing of each other), and repeats the membership's
-- organization so every read can be scoped by both. The coach's tools write these tables; the
-- coach reads them back as its data sources (spotter_shared.coach_data). Body measures are stored
-- metric (cm, kg) and shown in the member's units.

-- Equipment at a location: [{"name": str, "category": str, "weights": [numbers]?}, …].
CREATE FUNCTION member_equipment_is_valid(items jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(items) IS DISTINCT FROM 'array' THEN false ELSE NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(items) AS e(item)
         WHERE jsonb_typeof(item) <> 'object'
            OR jsonb_typeof(item -> 'name') IS DISTINCT FROM 'string'
            OR coalesce(item ->> 'category', '') NOT IN ('free_weights', 'machines', 'cardio', 'bodyweight', 'accessories')
            -- weights: absent, null, or an array of numbers (CASE: never expand a non-array)
            OR CASE jsonb_typeof(item -> 'weights')
                   WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(item -> 'weights') AS w(weight)
                                              WHERE jsonb_typeof(weight) <> 'number')
                   WHEN 'null' THEN false
                   ELSE item ? 'weights'
               END
    ) END
$$;

-- Logged exercises: [{"exercise_name": str, "exercise_type": reps|hold|duration|intervals, …}, …];
-- the rest of an item (sets, loads, muscles_utilized, completed, …) is the tool's to validate.
CREATE FUNCTION member_exercises_are_valid(items jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(items) IS DISTINCT FROM 'array' THEN false ELSE NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(items) AS e(item)
         WHERE jsonb_typeof(item) <> 'object'
            OR jsonb_typeof(item -> 'exercise_name') IS DISTINCT FROM 'string'
            OR coalesce(item ->> 'exercise_type', '') NOT IN ('reps', 'hold', 'duration', 'intervals')
    ) END
$$;

CREATE TABLE member_profiles (
    membership_id   uuid PRIMARY KEY REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    sex             varchar(16) CHECK (sex IN ('female', 'male', 'other')),
    birth_date      date,
    height_cm       numeric(5,1) CHECK (height_cm > 0),
    weight_kg       numeric(5,1) CHECK (weight_kg > 0),
    body_fat_pct    numeric(4,1) CHECK (body_fat_pct >= 0 AND body_fat_pct < 100),
    experience      varchar(16) NOT NULL DEFAULT 'intermediate'
                    CHECK (experience IN ('beginner', 'intermediate', 'advanced')),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER member_profiles_touch BEFORE UPDATE ON member_profiles FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- No row: kg and km.
CREATE TABLE member_settings (
    membership_id   uuid PRIMARY KEY REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    weight_unit     varchar(2) NOT NULL DEFAULT 'kg' CHECK (weight_unit IN ('kg', 'lb')),
    distance_unit   varchar(2) NOT NULL DEFAULT 'km' CHECK (distance_unit IN ('km', 'mi')),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER member_settings_touch BEFORE UPDATE ON member_settings FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- Where a member trains and what is there; equipment weights are in the member's weight unit.
CREATE TABLE member_locations (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name            varchar(120) NOT NULL,
    description     text,
    is_current      boolean NOT NULL DEFAULT false,
    equipment       jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (member_equipment_is_valid(equipment)),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- set_current_location finds a location by name, case-insensitively: names must not collide.
CREATE UNIQUE INDEX member_locations_name_key ON member_locations (membership_id, lower(name));
-- At most one current location per member, held by the database: switching clears then sets.
CREATE UNIQUE INDEX member_locations_one_current ON member_locations (membership_id) WHERE is_current;
CREATE TRIGGER member_locations_touch BEFORE UPDATE ON member_locations FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- Training goals (strength, mobility, …) and muscles to focus on (the 16 preset muscles).
CREATE TABLE member_goals (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kind            varchar(16) NOT NULL CHECK (kind IN ('category', 'muscle')),
    name            varchar(64) NOT NULL,
    priority        smallint NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
    -- clock_timestamp: rows added in one transaction keep the order they were added in
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (membership_id, kind, name),
    CHECK (
        (kind = 'category' AND name IN ('strength', 'hypertrophy', 'endurance', 'mobility', 'fat_loss', 'power',
                                        'general_fitness'))
        OR (kind = 'muscle' AND name IN ('Chest', 'Back', 'Shoulders', 'Biceps', 'Triceps', 'Abs', 'Lower Back',
                                         'Quadriceps', 'Hamstrings', 'Glutes', 'Calves', 'Trapezius', 'Abductors',
                                         'Adductors', 'Forearms', 'Neck'))
    )
);

-- What the member asked the coach to keep in mind ("no jumping"); retired, not deleted.
CREATE TABLE member_preferences (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    text            varchar(500) NOT NULL,
    active          boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX member_preferences_member_idx ON member_preferences (membership_id, created_at) WHERE active;

-- Workouts the member did, as log_workout recorded them. session_id and call_id name the coach's
-- session and the tool call that logged it: a retried call is stored once.
CREATE TABLE member_workout_logs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    membership_id   uuid NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    session_id      uuid,
    call_id         varchar(64),
    performed_at    timestamptz NOT NULL DEFAULT now(),
    title           varchar(255) NOT NULL,
    notes           text,
    exercises       jsonb NOT NULL CHECK (member_exercises_are_valid(exercises)),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, call_id)
);
CREATE INDEX member_workout_logs_member_idx ON member_workout_logs (membership_id, performed_at DESC);
