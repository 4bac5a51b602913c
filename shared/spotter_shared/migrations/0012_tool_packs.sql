-- Seed 002's tool packs: an external system's OpenAPI document, turned into tools for the
-- organizations that enable it. Written by the `spotter packs` command; the tool-runner reads them.
-- Header values (API keys) are stored encrypted (Fernet, SPOTTER_PACK_SECRET_KEY); their names are
-- kept in the clear so `spotter packs list` can say which headers a pack sends without showing them.
CREATE TABLE tool_packs (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name              varchar(24) NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9_]{0,23}$'),
    title             text,
    spec              jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    spec_source       text NOT NULL,
    base_url          text NOT NULL CHECK (base_url ~ '^https?://'),
    header_names      text[] NOT NULL DEFAULT '{}',
    headers_encrypted text,
    rules_yaml        text,
    operations        integer NOT NULL CHECK (operations > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER tool_packs_touch BEFORE UPDATE ON tool_packs FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

CREATE TABLE tool_pack_organizations (
    pack_id         uuid NOT NULL REFERENCES tool_packs(id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    rules_yaml      text,
    enabled_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pack_id, organization_id)
);
CREATE INDEX tool_pack_organizations_org_idx ON tool_pack_organizations (organization_id);
