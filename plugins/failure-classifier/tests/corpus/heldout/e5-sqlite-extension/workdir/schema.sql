.load /usr/lib/sqlite3/corpus_vec0
SELECT 1;
