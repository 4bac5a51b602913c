-- Seed 002: a tool pack's constraint rule may ask a person to confirm one particular call. The call
-- waits 'pending' like a declared gate, and its row says which rule asked and why, so the confirmation
-- can be shown and accepted after a restart. Owned by the tool-runner, like the rest of the table.
ALTER TABLE ai_tool_executions ADD COLUMN gate jsonb CHECK (gate IS NULL OR jsonb_typeof(gate) = 'object');
