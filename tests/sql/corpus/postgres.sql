-- Attack corpus for PostgreSQL. Every case must be refused or fail, and leave the database,
-- the roles' settings and the canary directory unchanged. `write: yes` cases also run with
-- admission switched off (as a role that may write the tables): the read-only session must hold.
-- Placeholders: {canary} (a world-writable directory), {schema} (the test schema).

-- name: commit-then-drop
-- class: transaction escape (reference postgres server)
-- write: yes
COMMIT; DROP TABLE sales_demo;

-- name: rollback-then-delete
-- class: transaction escape
-- write: yes
ROLLBACK; DELETE FROM sales_demo;

-- name: begin-read-write
-- class: transaction escape
-- write: yes
BEGIN READ WRITE; UPDATE sales_demo SET units = 0;

-- name: end-then-truncate
-- class: transaction escape
-- write: yes
END; TRUNCATE sales_demo;

-- name: abort-then-insert
-- class: transaction escape
-- write: yes
ABORT; INSERT INTO audit_log (note) VALUES ('x');

-- name: select-then-delete
-- class: stacked statements
-- write: yes
SELECT 1; DELETE FROM sales_demo WHERE id < 10

-- name: commit-alone
-- class: transaction control
COMMIT

-- name: set-transaction-read-write
-- class: transaction control
-- write: yes
SET TRANSACTION READ WRITE

-- name: savepoint
-- class: transaction control
SAVEPOINT s1

-- name: data-modifying-cte-delete
-- class: data-modifying CTE (DBHub #271)
-- write: yes
WITH d AS (DELETE FROM sales_demo WHERE id = 1 RETURNING *) SELECT * FROM d

-- name: data-modifying-cte-update
-- class: data-modifying CTE
-- write: yes
WITH u AS (UPDATE sales_demo SET revenue = 0 WHERE id = 2 RETURNING id) SELECT count(*) FROM u

-- name: data-modifying-cte-insert-nested
-- class: data-modifying CTE
-- write: yes
WITH a AS (SELECT 1 AS x), b AS (INSERT INTO audit_log (note) SELECT 'cte' FROM a RETURNING id) SELECT * FROM a, b

-- name: select-into
-- class: SELECT INTO
-- write: yes
SELECT * INTO stolen_copy FROM sales_demo

-- name: select-into-temp
-- class: SELECT INTO
-- write: yes
SELECT id INTO TEMP TABLE tmp_copy FROM sales_demo

-- name: create-table-as
-- class: DDL
-- write: yes
CREATE TABLE stolen AS SELECT * FROM sales_demo

-- name: for-update
-- class: locking clause
SELECT * FROM sales_demo FOR UPDATE

-- name: for-share-nowait
-- class: locking clause
SELECT id FROM sales_demo WHERE id = 1 FOR SHARE NOWAIT

-- name: for-update-in-subquery
-- class: locking clause
SELECT * FROM (SELECT id FROM sales_demo FOR UPDATE) s

-- name: for-no-key-update-union
-- class: locking clause
SELECT 1 UNION ALL (SELECT id FROM sales_demo FOR NO KEY UPDATE)

-- name: explain-analyze-delete
-- class: EXPLAIN ANALYZE of DML (pg-mcp-pro #153)
-- write: yes
EXPLAIN ANALYZE DELETE FROM sales_demo

-- name: explain-plain
-- class: EXPLAIN
EXPLAIN SELECT * FROM sales_demo

-- name: pg-read-file
-- class: server files
SELECT pg_read_file('/etc/passwd')

-- name: pg-read-file-from-clause
-- class: server files as a table function (pg-mcp-pro #178)
SELECT * FROM pg_read_file('/etc/passwd') AS f(line)

-- name: pg-read-file-lateral
-- class: server files as a table function
SELECT s.id, f FROM sales_demo s, LATERAL pg_read_file('/etc/hostname') AS f LIMIT 1

-- name: pg-read-binary-file-quoted
-- class: quoted function name
SELECT "pg_read_binary_file"('/etc/passwd')

-- name: pg-read-file-catalog-prefix
-- class: schema-qualified function
SELECT pg_catalog.pg_read_file('/etc/passwd')

-- name: pg-read-file-quoted-catalog
-- class: quoted schema-qualified function
SELECT "pg_catalog"."pg_read_file"('/etc/passwd')

-- name: pg-ls-dir
-- class: server files
SELECT * FROM pg_ls_dir('.')

-- name: pg-stat-file
-- class: server files
SELECT pg_stat_file('postgresql.conf')

-- name: lo-import
-- class: large objects
-- write: yes
SELECT lo_import('/etc/passwd')

-- name: lo-export
-- class: large objects
-- write: yes
SELECT lo_export(lo_from_bytea(0, 'x'::bytea), '{canary}/lo.txt')

-- name: lo-from-bytea
-- class: large objects
-- write: yes
SELECT lo_from_bytea(0, '\x41'::bytea)

-- name: copy-to-program
-- class: COPY TO PROGRAM
-- write: yes
COPY sales_demo TO PROGRAM 'touch {canary}/pwned'

-- name: copy-to-file
-- class: COPY to a server file
-- write: yes
COPY (SELECT * FROM sales_demo) TO '{canary}/dump.csv'

-- name: copy-from-file
-- class: COPY from a server file
-- write: yes
COPY audit_log (note) FROM '/etc/hostname'

-- name: dblink-exec
-- class: remote servers
-- write: yes
SELECT dblink_exec('dbname=test', 'DROP TABLE sales_demo')

-- name: dblink-connect
-- class: remote servers
SELECT * FROM dblink('dbname=test', 'SELECT 1') AS t(a int)

-- name: set-config-read-write
-- class: sticky session settings
SELECT set_config('default_transaction_read_only', 'off', false)

-- name: set-config-in-from
-- class: sticky session settings
SELECT * FROM set_config('transaction_read_only', 'off', true)

-- name: set-session
-- class: SET
SET SESSION default_transaction_read_only = off

-- name: set-role
-- class: SET
SET ROLE postgres

-- name: reset-all
-- class: SET
RESET ALL

-- name: alter-role-set
-- class: role settings
-- write: yes
ALTER ROLE CURRENT_USER SET default_transaction_read_only = off

-- name: pg-stat-reset
-- class: side effects in read-only transactions
-- write: yes
SELECT pg_stat_reset()

-- name: pg-stat-reset-shared
-- class: side effects in read-only transactions
-- write: yes
SELECT pg_stat_reset_shared('bgwriter')

-- name: logical-emit-message
-- class: side effects in read-only transactions
SELECT pg_logical_emit_message(true, 'mcpkit', 'hello')

-- name: advisory-lock
-- class: advisory locks
SELECT pg_advisory_lock(42)

-- name: advisory-lock-per-row
-- class: advisory locks
SELECT pg_try_advisory_lock(id) FROM sales_demo LIMIT 3

-- name: terminate-backend
-- class: backend control
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid()

-- name: cancel-backend
-- class: backend control
SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()

-- name: reload-conf
-- class: backend control
SELECT pg_reload_conf()

-- name: pg-sleep
-- class: sleeping
SELECT pg_sleep(30)

-- name: pg-sleep-for-quoted
-- class: quoted function name
SELECT "pg_sleep_for"('30 seconds')

-- name: pg-sleep-attribute-notation
-- class: attribute notation (col).fn
SELECT (units::float8).pg_sleep FROM sales_demo LIMIT 1

-- name: attribute-notation-alias
-- class: attribute notation
SELECT s.pg_sleep FROM (SELECT 5.0::float8 AS x) s

-- name: pg-sleep-in-where
-- class: side effect hidden in a predicate
SELECT id FROM sales_demo WHERE pg_sleep(1) IS NOT NULL LIMIT 1

-- name: pg-sleep-in-order-by
-- class: side effect hidden in ORDER BY
SELECT id FROM sales_demo ORDER BY pg_sleep(0.01) LIMIT 1

-- name: query-to-xml
-- class: SQL in strings (query_to_xml)
-- write: yes
SELECT query_to_xml('DELETE FROM sales_demo RETURNING id', true, true, '')

-- name: query-to-xml-upper-quoted
-- class: SQL in strings, quoted
SELECT "query_to_xml_and_xmlschema"('SELECT 1', true, true, '')

-- name: cursor-to-xml
-- class: SQL in strings
SELECT cursor_to_xml('c', 1, true, true, '')

-- name: ts-stat
-- class: SQL in strings (ts_stat runs its argument)
SELECT * FROM ts_stat('SELECT to_tsvector(notes) FROM sales_demo')

-- name: nextval
-- class: sequences
-- write: yes
SELECT nextval('canary_seq')

-- name: setval
-- class: sequences
-- write: yes
SELECT setval('canary_seq', 1000)

-- name: nextval-catalog
-- class: sequences, schema-qualified
-- write: yes
SELECT pg_catalog.nextval('{schema}.canary_seq')

-- name: user-volatile-function
-- class: user-defined side effect (provolatile = v)
-- write: yes
SELECT bump_audit()

-- name: user-volatile-function-qualified
-- class: user-defined side effect, schema-qualified
-- write: yes
SELECT {schema}.bump_audit()

-- name: pg-notify
-- class: notifications
SELECT pg_notify('mcpkit', 'x')

-- name: listen
-- class: notifications
LISTEN mcpkit

-- name: notify
-- class: notifications
NOTIFY mcpkit

-- name: do-block
-- class: DO
-- write: yes
DO $$ BEGIN DELETE FROM sales_demo; END $$

-- name: call-procedure
-- class: CALL
CALL some_procedure()

-- name: prepare-execute
-- class: PREPARE/EXECUTE
-- write: yes
PREPARE p AS DELETE FROM sales_demo

-- name: create-function
-- class: DDL
-- write: yes
CREATE FUNCTION evil() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$

-- name: grant
-- class: DDL
-- write: yes
GRANT ALL ON sales_demo TO PUBLIC

-- name: comment-on
-- class: DDL
-- write: yes
COMMENT ON TABLE sales_demo IS 'pwned'

-- name: vacuum
-- class: maintenance
VACUUM sales_demo

-- name: lock-table
-- class: locking
LOCK TABLE sales_demo IN ACCESS EXCLUSIVE MODE

-- name: insert-on-conflict
-- class: DML
-- write: yes
INSERT INTO audit_log (id, note) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET note = 'y'

-- name: merge
-- class: DML
-- write: yes
MERGE INTO audit_log a USING (SELECT 1 AS id) s ON a.id = s.id WHEN NOT MATCHED THEN INSERT (note) VALUES ('m')

-- name: update-returning
-- class: DML
-- write: yes
UPDATE sales_demo SET notes = 'x' RETURNING id

-- name: backslash-quote-split
-- class: parser disagreement (backslash in a string; every call pins standard_conforming_strings=on, so sqlglot and PostgreSQL both end the string at the backslash and see two statements)
-- write: yes
SELECT 'x\'; DELETE FROM sales_demo; -- '

-- name: escape-string-split
-- class: parser disagreement (E'' string)
-- write: yes
SELECT E'\''; DELETE FROM sales_demo; --'

-- name: unicode-escape-string
-- class: parser disagreement (U&'' string)
SELECT U&'\0027; DELETE FROM sales_demo; --'

-- name: nested-comment-hides-statement
-- class: parser disagreement (nested comments)
-- write: yes
SELECT /* /* */ 1; DELETE FROM sales_demo; /* */ 2

-- name: dollar-quote-semicolon
-- class: dollar quoting
-- write: yes
SELECT $$;$$; DELETE FROM sales_demo

-- name: tagged-dollar-quote
-- class: dollar quoting
-- write: yes
SELECT $a$ $$ $a$; DROP TABLE sales_demo

-- name: psql-meta-command
-- class: client meta-commands
SELECT 1 \gexec

-- name: bind-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = $1

-- name: pyformat-parameter
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = %(id)s

-- name: alter-system
-- class: server settings
-- write: yes
ALTER SYSTEM SET log_statement = 'none'

-- name: create-extension
-- class: DDL
-- write: yes
CREATE EXTENSION IF NOT EXISTS dblink

-- name: load-library
-- class: server code
LOAD 'auto_explain'

-- name: show-all
-- class: SHOW
SHOW ALL

-- name: discard-all
-- class: session reset
DISCARD ALL

-- name: declare-cursor
-- class: cursors
DECLARE c CURSOR FOR SELECT * FROM sales_demo

-- name: txid-current
-- class: transaction id assignment
SELECT pg_export_snapshot()

-- name: replication-slot
-- class: replication
SELECT pg_create_logical_replication_slot('mcpkit_slot', 'test_decoding')

-- name: stats-user-tables-side-channel
-- class: other sessions' activity (red team 10 F2)
SELECT relname, seq_scan, n_tup_ins, n_tup_upd, n_live_tup FROM pg_stat_user_tables

-- name: statio-all-tables
-- class: other sessions' activity
SELECT relname, heap_blks_read, heap_blks_hit FROM pg_statio_all_tables

-- name: stat-database-all-databases
-- class: other sessions' activity
SELECT datname, numbackends, xact_commit, sessions FROM pg_stat_database

-- name: stat-bgwriter-wal-slru
-- class: other sessions' activity
SELECT (SELECT buffers_alloc FROM pg_stat_bgwriter) AS b, (SELECT wal_records FROM pg_stat_wal) AS w,
  (SELECT sum(blks_hit) FROM pg_stat_slru) AS s

-- name: stat-xact-and-user-functions
-- class: other sessions' activity
SELECT (SELECT count(*) FROM pg_stat_xact_user_tables) AS x, (SELECT count(*) FROM pg_stat_user_functions) AS f

-- name: stat-get-functions
-- class: other sessions' activity
SELECT pg_stat_get_tuples_inserted(c.oid), pg_stat_get_numscans(c.oid) FROM pg_class c

-- name: stat-get-db-functions
-- class: other sessions' activity
SELECT pg_stat_get_db_xact_commit(d.oid) FROM pg_database d
