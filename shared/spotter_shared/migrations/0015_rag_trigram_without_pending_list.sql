-- Issue 14: rag's trigram index without a pending list. With GIN's fastupdate on (the default), new
-- and changed documents wait in an unsorted pending list until a vacuum, and every search scans all
-- of it: after the indexer had written a studio, ambient's lexical half (one LIKE per term and name
-- key, ~28 for a message) read ~8,000 index pages and took 40-50 ms instead of 300 pages and 9 ms.
-- Documents are written in the background by rag's indexer; searches are on a turn's way to the
-- model, so the indexer pays for keeping the index sorted. Owned by rag, like the table.
ALTER INDEX rag_documents_body_trgm_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('rag_documents_body_trgm_idx'::regclass);
