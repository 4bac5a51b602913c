-- One writer per table: a conversation's lifetime usage is billing's, so it leaves the
-- orchestrator's ai_conversations for a table of billing's own. Types are those of the moved
-- columns. A conversation without a row here has used nothing yet (readers LEFT JOIN, 0 if absent).
CREATE TABLE ai_conversation_usage (
    conversation_id             uuid PRIMARY KEY REFERENCES ai_conversations(id) ON DELETE CASCADE,
    organization_id             uuid NOT NULL,
    total_input_tokens          integer NOT NULL DEFAULT 0,
    total_output_tokens         integer NOT NULL DEFAULT 0,
    total_cache_read_tokens     integer NOT NULL DEFAULT 0,
    total_cache_creation_tokens integer NOT NULL DEFAULT 0,
    cost_usd_micros             bigint NOT NULL DEFAULT 0,
    updated_at                  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO ai_conversation_usage (conversation_id, organization_id, total_input_tokens, total_output_tokens,
                                   total_cache_read_tokens, total_cache_creation_tokens, cost_usd_micros, updated_at)
SELECT id, organization_id, total_input_tokens, total_output_tokens,
       total_cache_read_tokens, total_cache_creation_tokens, cost_usd_micros, updated_at
  FROM ai_conversations
 WHERE total_input_tokens <> 0 OR total_output_tokens <> 0 OR total_cache_read_tokens <> 0
    OR total_cache_creation_tokens <> 0 OR cost_usd_micros <> 0;

ALTER TABLE ai_conversations
    DROP COLUMN total_input_tokens,
    DROP COLUMN total_output_tokens,
    DROP COLUMN total_cache_read_tokens,
    DROP COLUMN total_cache_creation_tokens,
    DROP COLUMN cost_usd_micros;
