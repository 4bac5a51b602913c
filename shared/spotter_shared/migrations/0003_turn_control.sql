-- Each resume command (confirm, pick, undo, cancel) is a turn of its own; this is what it resolved.
ALTER TABLE ai_turns ADD COLUMN tool_use_id varchar(64);
CREATE INDEX ai_turns_running_idx ON ai_turns (conversation_id) WHERE status = 'running';
