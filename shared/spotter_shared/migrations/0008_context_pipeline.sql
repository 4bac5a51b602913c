-- The context pipeline (issue 8): rag's hybrid index, conversation locale, and summaries whose
-- embeddings may come from more than one provider.
--
-- Vectors of different models never mix: each row names its model, and each model has its own
-- HNSW index over a cast to its dimension, partial on the model (pgvector's documented way to
-- index vectors of several dimensions in one column). Queries repeat the cast and the predicate.

CREATE TABLE rag_documents (
    scope             varchar(16) NOT NULL CHECK (scope IN ('program', 'workout', 'exercise', 'member')),
    entity_id         uuid NOT NULL,
    -- NULL: an entry of the global exercise library, visible to every studio.
    organization_id   uuid REFERENCES organizations(id) ON DELETE CASCADE,
    label             text NOT NULL,
    detail            text,
    -- What is searched, lexically and semantically: name, aliases (all languages), description.
    body              text NOT NULL,
    body_hash         varchar(64) NOT NULL,
    model             varchar(100) NOT NULL,
    embedding         vector NOT NULL,
    source_updated_at timestamptz,
    indexed_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, entity_id)
);
CREATE INDEX rag_documents_org_scope_idx ON rag_documents (organization_id, scope, model);
CREATE INDEX rag_documents_body_trgm_idx ON rag_documents USING gin (body gin_trgm_ops);
CREATE INDEX rag_documents_e5_hnsw ON rag_documents
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE model = 'multilingual-e5-small-q4';
CREATE INDEX rag_documents_voyage_hnsw ON rag_documents
    USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE model = 'voyage-multilingual-2';

-- Summaries: the column was vector(1024) (Voyage only); it now holds whichever model embedded it.
DROP INDEX IF EXISTS ai_conversations_summary_hnsw;
ALTER TABLE ai_conversations ALTER COLUMN summary_embedding TYPE vector;
ALTER TABLE ai_conversations ADD COLUMN summary_embedding_model varchar(100);
ALTER TABLE ai_conversations ADD COLUMN locale varchar(16) NOT NULL DEFAULT 'en';
CREATE INDEX ai_conversations_summary_e5_hnsw ON ai_conversations
    USING hnsw ((summary_embedding::vector(384)) vector_cosine_ops)
    WHERE summary_embedding_model = 'multilingual-e5-small-q4';
CREATE INDEX ai_conversations_summary_voyage_hnsw ON ai_conversations
    USING hnsw ((summary_embedding::vector(1024)) vector_cosine_ops)
    WHERE summary_embedding_model = 'voyage-multilingual-2';
CREATE INDEX ai_conversations_title_trgm_idx ON ai_conversations USING gin (title gin_trgm_ops);
CREATE INDEX ai_conversations_summary_trgm_idx ON ai_conversations USING gin (summary gin_trgm_ops);
