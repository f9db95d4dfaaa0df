-- Attack corpus for SQLite. Every case must be refused or fail and leave the database file and
-- every file in its directory unchanged. `write: yes` cases also run with admission switched
-- off: the file is opened mode=ro with query_only and an authorizer that admits reads only.
-- Placeholder: {canary} (the database's directory).

-- name: insert
-- class: DML
-- write: yes
INSERT INTO sales_demo (id, region, product, year, quarter, units, revenue) VALUES (99999, 'x', 'y', 2020, 1, 1, 1)

-- name: update
-- class: DML
-- write: yes
UPDATE sales_demo SET units = 0

-- name: delete
-- class: DML
-- write: yes
DELETE FROM sales_demo

-- name: replace-into
-- class: DML
-- write: yes
REPLACE INTO product_vectors (id, name, embedding) VALUES (1, 'x', '[]')

-- name: upsert
-- class: DML
-- write: yes
INSERT INTO product_vectors (id, name, embedding) VALUES (1, 'x', '[]') ON CONFLICT(id) DO UPDATE SET name = 'y'

-- name: with-delete
-- class: WITH-prefixed DML
-- write: yes
WITH x AS (SELECT 1) DELETE FROM sales_demo

-- name: with-update
-- class: WITH-prefixed DML
-- write: yes
WITH ids AS (SELECT id FROM sales_demo LIMIT 5) UPDATE sales_demo SET units = 0 WHERE id IN (SELECT id FROM ids)

-- name: with-insert
-- class: WITH-prefixed DML
-- write: yes
WITH r AS (SELECT 1 AS id) INSERT INTO product_vectors SELECT 5000, 'x', '[]' FROM r

-- name: update-returning
-- class: DML
-- write: yes
UPDATE sales_demo SET notes = 'x' WHERE id = 1 RETURNING id

-- name: stacked-delete
-- class: stacked statements
-- write: yes
SELECT 1; DELETE FROM sales_demo

-- name: stacked-after-comment
-- class: stacked statements
-- write: yes
SELECT 1 /* x */; DROP TABLE sales_demo -- y

-- name: pragma-query-only-off
-- class: PRAGMA query_only
-- write: yes
PRAGMA query_only = OFF

-- name: pragma-query-only-call
-- class: PRAGMA query_only
-- write: yes
PRAGMA query_only(0)

-- name: pragma-writable-schema
-- class: PRAGMA
-- write: yes
PRAGMA writable_schema = ON

-- name: pragma-journal-mode
-- class: PRAGMA
-- write: yes
PRAGMA journal_mode = DELETE

-- name: pragma-table-info-injection
-- class: identifier injection in PRAGMA table_info
-- write: yes
PRAGMA table_info(sales_demo); DROP TABLE sales_demo

-- name: attach
-- class: ATTACH
-- write: yes
ATTACH DATABASE '{canary}/attached.db' AS pwn

-- name: attach-memory
-- class: ATTACH
ATTACH ':memory:' AS mem

-- name: detach
-- class: ATTACH
DETACH DATABASE main

-- name: vacuum-into
-- class: VACUUM INTO
-- write: yes
VACUUM INTO '{canary}/copy.db'

-- name: vacuum
-- class: maintenance
-- write: yes
VACUUM

-- name: reindex
-- class: maintenance
-- write: yes
REINDEX

-- name: analyze
-- class: maintenance
-- write: yes
ANALYZE

-- name: load-extension
-- class: load_extension
SELECT load_extension('/tmp/evil.so')

-- name: load-extension-quoted
-- class: load_extension, quoted
SELECT "load_extension"('/tmp/evil.so', 'entry')

-- name: load-extension-in-where
-- class: load_extension hidden in a predicate
SELECT id FROM sales_demo WHERE load_extension('x') IS NULL

-- name: fileio-readfile
-- class: fileio functions
SELECT readfile('/etc/passwd')

-- name: fileio-writefile
-- class: fileio functions
-- write: yes
SELECT writefile('{canary}/written.txt', 'pwned')

-- name: fsdir
-- class: fileio table function
SELECT * FROM fsdir('/etc')

-- name: edit
-- class: shell functions
SELECT edit('x', 'vi')

-- name: fts3-tokenizer
-- class: fts3_tokenizer
SELECT fts3_tokenizer('simple')

-- name: fts3-tokenizer-pointer
-- class: fts3_tokenizer
SELECT fts3_tokenizer('mytok', x'4141414141414141')

-- name: create-table
-- class: DDL
-- write: yes
CREATE TABLE stolen AS SELECT * FROM sales_demo

-- name: create-temp-table
-- class: DDL
CREATE TEMP TABLE t1 (a)

-- name: create-view
-- class: DDL
-- write: yes
CREATE VIEW v1 AS SELECT 1

-- name: create-trigger
-- class: DDL
-- write: yes
CREATE TRIGGER tr AFTER INSERT ON sales_demo BEGIN DELETE FROM sales_demo; END

-- name: create-index
-- class: DDL
-- write: yes
CREATE INDEX ix_units ON sales_demo (units)

-- name: drop-table
-- class: DDL
-- write: yes
DROP TABLE sales_demo

-- name: alter-table
-- class: DDL
-- write: yes
ALTER TABLE sales_demo ADD COLUMN pwned TEXT

-- name: create-virtual-table
-- class: DDL
-- write: yes
CREATE VIRTUAL TABLE ft USING fts5(content)

-- name: begin-immediate
-- class: transaction control
BEGIN IMMEDIATE

-- name: savepoint
-- class: transaction control
SAVEPOINT s1

-- name: commit
-- class: transaction control
COMMIT

-- name: select-into
-- class: SELECT INTO
-- write: yes
SELECT * INTO stolen FROM sales_demo

-- name: positional-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = ?

-- name: named-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = :id

-- name: dollar-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = $id

-- name: at-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = @id

-- name: numbered-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = ?1

-- name: explain-delete
-- class: EXPLAIN
EXPLAIN DELETE FROM sales_demo

-- name: explain-query-plan
-- class: EXPLAIN
EXPLAIN QUERY PLAN SELECT * FROM sales_demo

-- name: nested-comment-stack
-- class: comments hiding statements
-- write: yes
SELECT /* /* */ 1; DELETE FROM sales_demo; /* */ 2

-- name: line-comment-stack
-- class: comments hiding statements
-- write: yes
SELECT 1 -- comment
; DELETE FROM sales_demo
