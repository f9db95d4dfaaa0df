-- Attack corpus for MySQL/MariaDB. Every case must be refused or fail and leave the data, grants,
-- global settings and the canary directory unchanged. `write: yes` cases also run with admission
-- switched off, as a user that may write the tables: the READ ONLY session must hold.
-- Placeholder: {canary} (a world-writable directory).

-- name: executable-comment-delete
-- class: executable comments /*! */
-- write: yes
/*!50000 DELETE */ FROM sales_demo

-- name: executable-comment-stacked
-- class: executable comments /*! */
-- write: yes
SELECT 1 /*!; DELETE FROM sales_demo */

-- name: executable-comment-version
-- class: executable comments /*! */
-- write: yes
SELECT 1 /*!99999 , (SELECT 1 FROM sales_demo FOR UPDATE) */

-- name: mariadb-executable-comment
-- class: executable comments /*M! */
-- write: yes
SELECT 1 /*M!100000 ; UPDATE sales_demo SET units = 0 */

-- name: into-outfile
-- class: INTO OUTFILE
-- write: yes
SELECT * FROM sales_demo INTO OUTFILE '{canary}/out.txt'

-- name: into-dumpfile
-- class: INTO DUMPFILE
-- write: yes
SELECT receipt FROM sales_demo LIMIT 1 INTO DUMPFILE '{canary}/receipt.bin'

-- name: into-outfile-before-from
-- class: INTO OUTFILE
-- write: yes
SELECT id INTO OUTFILE '{canary}/ids.txt' FROM sales_demo

-- name: into-variable
-- class: INTO @var
SELECT id INTO @x FROM sales_demo LIMIT 1

-- name: load-file
-- class: LOAD_FILE
SELECT LOAD_FILE('/etc/passwd')

-- name: load-file-quoted
-- class: LOAD_FILE, quoted name
SELECT `load_file`('/etc/passwd')

-- name: load-data
-- class: LOAD DATA
-- write: yes
LOAD DATA INFILE '/etc/hostname' INTO TABLE sales_demo

-- name: get-lock
-- class: GET_LOCK
SELECT GET_LOCK('mcpkit', 10)

-- name: sleep
-- class: SLEEP
SELECT SLEEP(30)

-- name: sleep-in-where
-- class: SLEEP hidden in a predicate
SELECT id FROM sales_demo WHERE SLEEP(1) = 0 LIMIT 1

-- name: benchmark
-- class: BENCHMARK
SELECT BENCHMARK(100000000, MD5('x'))

-- name: do-sleep
-- class: DO
DO SLEEP(5)

-- name: hash-comment-stack
-- class: parser disagreement (# comments)
-- write: yes
SELECT 1 # comment
; DELETE FROM sales_demo

-- name: backslash-quote-split
-- class: parser disagreement (NO_BACKSLASH_ESCAPES)
-- write: yes
SELECT 'x\'; DELETE FROM sales_demo; -- '

-- name: double-dash-no-space
-- class: parser disagreement (-- without a space)
-- write: yes
SELECT 1 --1; DELETE FROM sales_demo

-- name: stacked-delete
-- class: stacked statements
-- write: yes
SELECT 1; DELETE FROM sales_demo

-- name: set-global
-- class: SET
-- write: yes
SET GLOBAL read_only = 0

-- name: set-session-variable
-- class: SET
SET SESSION sql_mode = 'ANSI_QUOTES'

-- name: set-user-variable
-- class: SET
SET @x = 1

-- name: assign-in-select
-- class: variables
SELECT @x := units FROM sales_demo LIMIT 1

-- name: system-variable
-- class: variables
SELECT @@secure_file_priv

-- name: insert
-- class: DML
-- write: yes
INSERT INTO sales_demo (id, region, product, year, quarter, units, revenue) VALUES (99999, 'x', 'y', 2020, 1, 1, 1)

-- name: replace
-- class: DML
-- write: yes
REPLACE INTO product_vectors (id, name, embedding) VALUES (1, 'x', '[]')

-- name: update
-- class: DML
-- write: yes
UPDATE sales_demo SET units = 0

-- name: delete
-- class: DML
-- write: yes
DELETE FROM sales_demo WHERE id < 100

-- name: insert-on-duplicate
-- class: DML
-- write: yes
INSERT INTO product_vectors (id, name, embedding) VALUES (1, 'x', '[]') ON DUPLICATE KEY UPDATE name = 'y'

-- name: create-table
-- class: DDL with implicit commit
-- write: yes
CREATE TABLE stolen AS SELECT * FROM sales_demo

-- name: drop-table
-- class: DDL with implicit commit
-- write: yes
DROP TABLE product_vectors

-- name: alter-table
-- class: DDL with implicit commit
-- write: yes
ALTER TABLE sales_demo ADD COLUMN pwned INT

-- name: truncate
-- class: DDL with implicit commit
-- write: yes
TRUNCATE TABLE sales_demo

-- name: rename-table
-- class: DDL with implicit commit
-- write: yes
RENAME TABLE sales_demo TO sales_gone

-- name: create-temporary-table
-- class: temporary tables (allowed in READ ONLY transactions)
CREATE TEMPORARY TABLE t1 (a INT)

-- name: for-update
-- class: locking clause
SELECT * FROM sales_demo FOR UPDATE

-- name: lock-in-share-mode
-- class: locking clause
SELECT * FROM sales_demo LOCK IN SHARE MODE

-- name: lock-tables
-- class: locking
LOCK TABLES sales_demo WRITE

-- name: flush
-- class: server control
FLUSH TABLES

-- name: kill
-- class: server control
KILL CONNECTION 1

-- name: call
-- class: CALL
CALL some_procedure()

-- name: prepare
-- class: PREPARE/EXECUTE
-- write: yes
PREPARE s FROM 'DELETE FROM sales_demo'

-- name: handler
-- class: HANDLER
HANDLER sales_demo OPEN

-- name: start-transaction
-- class: transaction control
START TRANSACTION READ WRITE

-- name: commit-then-delete
-- class: transaction escape
-- write: yes
COMMIT; DELETE FROM sales_demo

-- name: xa-start
-- class: transaction control
XA START 'x'

-- name: show-grants
-- class: SHOW
SHOW GRANTS

-- name: explain-delete
-- class: EXPLAIN
-- write: yes
EXPLAIN DELETE FROM sales_demo

-- name: nextval-sequence
-- class: sequences (MariaDB)
SELECT NEXTVAL(some_sequence)

-- name: next-value-for
-- class: sequences (MariaDB)
SELECT NEXT VALUE FOR some_sequence

-- name: grant
-- class: DDL
-- write: yes
GRANT ALL ON *.* TO CURRENT_USER

-- name: create-user
-- class: DDL
-- write: yes
CREATE USER 'mcpkit_evil'@'%'

-- name: placeholder
-- class: unbound parameters
SELECT * FROM sales_demo WHERE id = ?

-- name: uuid-host-mac
-- class: UUID() v1 carries the database host's MAC address (red team my13 F7)
SELECT UUID() AS u

-- name: sys-guid-host-mac
-- class: SYS_GUID() is UUID() without dashes (red team my13 F7)
SELECT SYS_GUID() AS u

-- name: key-caches-counters
-- class: server-wide read/write counters move with other sessions' writes (red team my13 F3)
SELECT KEY_CACHE_NAME, WRITE_REQUESTS FROM information_schema.KEY_CACHES

-- name: innodb-metrics-counters
-- class: server-wide counters (red team my13 F3)
SELECT NAME, COUNT FROM information_schema.INNODB_METRICS
