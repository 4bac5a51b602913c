-- Issue 14: a conversation's last message position, bumped under the row lock like last_event_seq,
-- so appending a message is one statement (the row lock and the new position in one UPDATE) instead
-- of a transaction of two. Owned by the orchestrator, like the rest of the table.
ALTER TABLE ai_conversations ADD COLUMN last_message_position integer NOT NULL DEFAULT 0;
UPDATE ai_conversations c
   SET last_message_position = m.last
  FROM (SELECT conversation_id, max(position) AS last FROM ai_messages GROUP BY conversation_id) m
 WHERE m.conversation_id = c.id;
