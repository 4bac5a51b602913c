-- Issue 14: billing keeps each org's tier in memory and forgets it when told. Every change of a tier
-- (`spotter org tier`, the demo studio's upsert, a hand-written UPDATE) and every removed org notifies
-- `spotter_org_tier` with the org's id when its transaction commits.
CREATE FUNCTION spotter_org_tier_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('spotter_org_tier', OLD.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER organizations_tier_changed AFTER UPDATE OF tier ON organizations
    FOR EACH ROW WHEN (OLD.tier IS DISTINCT FROM NEW.tier) EXECUTE FUNCTION spotter_org_tier_changed();

CREATE TRIGGER organizations_removed AFTER DELETE ON organizations
    FOR EACH ROW EXECUTE FUNCTION spotter_org_tier_changed();
