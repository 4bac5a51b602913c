-- Every change to a studio row moves its updated_at, whoever makes it (a tool, the studio app, a
-- script): bulk actions bind to a preview through the selected rows' ids and updated_at (SPEC
-- decision 17), so an edit that left updated_at alone would slip past the check.
CREATE FUNCTION touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW IS DISTINCT FROM OLD THEN
        NEW.updated_at := greatest(clock_timestamp(), OLD.updated_at + interval '1 microsecond');
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER programs_touch BEFORE UPDATE ON programs FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER workouts_touch BEFORE UPDATE ON workouts FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER tasks_touch BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER exercises_touch BEFORE UPDATE ON exercises FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER assignments_touch BEFORE UPDATE ON assignments FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER class_sessions_touch BEFORE UPDATE ON class_sessions FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER program_templates_touch BEFORE UPDATE ON program_templates FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
