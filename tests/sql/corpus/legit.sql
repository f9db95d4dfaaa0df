-- Legitimate analytical queries over the demo tables. Each must be answered on every dialect it
-- names (default: all), and (unless `compare: no`) give the same rows as the query run as written.

-- name: count-all
SELECT count(*) FROM sales_demo

-- name: revenue-by-region
SELECT region, sum(revenue) AS revenue FROM sales_demo GROUP BY region ORDER BY revenue DESC

-- name: avg-units-by-product
SELECT product, avg(units) AS avg_units FROM sales_demo GROUP BY product ORDER BY product

-- name: totals-by-period
SELECT year, quarter, sum(units) AS units, count(*) AS deals FROM sales_demo GROUP BY year, quarter ORDER BY year, quarter

-- name: top-deals
SELECT id, region, product, revenue FROM sales_demo ORDER BY revenue DESC, id LIMIT 10

-- name: case-buckets
SELECT CASE WHEN units < 10 THEN 'small' WHEN units < 50 THEN 'medium' ELSE 'large' END AS size, count(*) AS n
FROM sales_demo GROUP BY CASE WHEN units < 10 THEN 'small' WHEN units < 50 THEN 'medium' ELSE 'large' END ORDER BY n DESC

-- name: having-filter
SELECT product, count(*) AS n FROM sales_demo GROUP BY product HAVING count(*) > 200 ORDER BY n DESC

-- name: distinct-regions
SELECT DISTINCT region FROM sales_demo ORDER BY region

-- name: count-distinct
SELECT count(DISTINCT product) AS products, count(DISTINCT region) AS regions FROM sales_demo

-- name: top3-per-region-row-number
SELECT region, product, revenue FROM (
  SELECT region, product, revenue, row_number() OVER (PARTITION BY region ORDER BY revenue DESC, id) AS rn FROM sales_demo
) ranked WHERE rn <= 3 ORDER BY region, rn

-- name: rank-products
SELECT product, total, rank() OVER (ORDER BY total DESC) AS r FROM (
  SELECT product, sum(revenue) AS total FROM sales_demo GROUP BY product) t ORDER BY r

-- name: dense-rank-regions
SELECT region, year, dense_rank() OVER (PARTITION BY region ORDER BY year DESC) AS dr FROM sales_demo GROUP BY region, year ORDER BY region, dr

-- name: running-total
SELECT year, quarter, q_rev, sum(q_rev) OVER (ORDER BY year, quarter) AS running FROM (
  SELECT year, quarter, sum(revenue) AS q_rev FROM sales_demo GROUP BY year, quarter) t ORDER BY year, quarter

-- name: lag-growth
SELECT year, rev, rev - lag(rev) OVER (ORDER BY year) AS growth FROM (
  SELECT year, sum(revenue) AS rev FROM sales_demo GROUP BY year) t ORDER BY year

-- name: lead-next
SELECT year, quarter, lead(q_units) OVER (ORDER BY year, quarter) AS next_units FROM (
  SELECT year, quarter, sum(units) AS q_units FROM sales_demo GROUP BY year, quarter) t ORDER BY year, quarter

-- name: ntile-quartiles
SELECT quartile, count(*) AS n, min(revenue) AS lo, max(revenue) AS hi FROM (
  SELECT revenue, ntile(4) OVER (ORDER BY revenue, id) AS quartile FROM sales_demo) t GROUP BY quartile ORDER BY quartile

-- name: avg-over-partition
SELECT DISTINCT region, avg(revenue) OVER (PARTITION BY region) AS region_avg FROM sales_demo ORDER BY region

-- name: first-value
SELECT DISTINCT region, first_value(product) OVER (PARTITION BY region ORDER BY revenue DESC, id) AS best FROM sales_demo ORDER BY region

-- name: percent-rank
SELECT product, total, percent_rank() OVER (ORDER BY total) AS pr FROM (
  SELECT product, sum(units) AS total FROM sales_demo GROUP BY product) t ORDER BY total

-- name: cume-dist
SELECT region, n, cume_dist() OVER (ORDER BY n) AS cd FROM (
  SELECT region, count(*) AS n FROM sales_demo GROUP BY region) t ORDER BY n

-- name: window-frame
SELECT year, quarter, q_units, avg(q_units) OVER (ORDER BY year, quarter ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS moving
FROM (SELECT year, quarter, sum(units) AS q_units FROM sales_demo GROUP BY year, quarter) t ORDER BY year, quarter

-- name: revenue-share
SELECT region, sum(revenue) AS rev, sum(revenue) * 100.0 / sum(sum(revenue)) OVER () AS pct FROM sales_demo GROUP BY region ORDER BY rev DESC

-- name: cte-two-levels
WITH by_region AS (SELECT region, sum(revenue) AS rev FROM sales_demo GROUP BY region),
     ranked AS (SELECT region, rev FROM by_region WHERE rev > 1000000)
SELECT region, rev FROM ranked ORDER BY rev DESC

-- name: recursive-cte-series
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) SELECT i FROM n ORDER BY i

-- name: recursive-cte-join
WITH RECURSIVE y(yr) AS (SELECT 2021 UNION ALL SELECT yr + 1 FROM y WHERE yr < 2024)
SELECT y.yr, count(s.id) AS deals FROM y LEFT JOIN sales_demo s ON s.year = y.yr GROUP BY y.yr ORDER BY y.yr

-- name: union-distinct
SELECT region AS label FROM sales_demo UNION SELECT product FROM sales_demo ORDER BY label

-- name: union-all-counts
SELECT 'deals' AS what, count(*) AS n FROM sales_demo UNION ALL SELECT 'vectors', count(*) FROM product_vectors

-- name: intersect
SELECT product FROM sales_demo WHERE region = 'Europe' INTERSECT SELECT product FROM sales_demo WHERE region = 'Asia Pacific' ORDER BY product

-- name: except
SELECT DISTINCT product FROM sales_demo EXCEPT SELECT product FROM sales_demo WHERE units > 300 ORDER BY product

-- name: in-subquery
SELECT count(*) FROM sales_demo WHERE product IN (SELECT product FROM sales_demo GROUP BY product HAVING avg(units) > 30)

-- name: correlated-subquery
SELECT count(*) FROM sales_demo s WHERE revenue > (SELECT avg(revenue) FROM sales_demo r WHERE r.region = s.region)

-- name: exists
SELECT DISTINCT region FROM sales_demo s WHERE EXISTS (SELECT 1 FROM sales_demo t WHERE t.region = s.region AND t.units > 500) ORDER BY region

-- name: not-in
SELECT count(*) FROM sales_demo WHERE region NOT IN (SELECT region FROM sales_demo WHERE year = 2021 AND units > 400)

-- name: scalar-subquery
SELECT region, count(*) AS n, (SELECT count(*) FROM sales_demo) AS total FROM sales_demo GROUP BY region ORDER BY region

-- name: join-derived-targets
SELECT s.region, sum(s.revenue) AS rev, t.target FROM sales_demo s
JOIN (SELECT 'Europe' AS region, 10000000 AS target UNION ALL SELECT 'North America', 12000000) t ON t.region = s.region
GROUP BY s.region, t.target ORDER BY s.region

-- name: left-join-derived
SELECT r.region, coalesce(x.n, 0) AS big FROM (SELECT DISTINCT region FROM sales_demo) r
LEFT JOIN (SELECT region, count(*) AS n FROM sales_demo WHERE units > 200 GROUP BY region) x ON x.region = r.region ORDER BY r.region

-- name: self-join-years
SELECT a.product, a.rev AS rev_2023, b.rev AS rev_2024 FROM
(SELECT product, sum(revenue) AS rev FROM sales_demo WHERE year = 2023 GROUP BY product) a JOIN
(SELECT product, sum(revenue) AS rev FROM sales_demo WHERE year = 2024 GROUP BY product) b ON a.product = b.product ORDER BY a.product

-- name: coalesce-nullif
SELECT region, coalesce(nullif(sum(CASE WHEN year = 2021 THEN units END), 0), -1) AS units_2021 FROM sales_demo GROUP BY region ORDER BY region

-- name: upper-lower
SELECT DISTINCT upper(region) AS r, lower(product) AS p FROM sales_demo WHERE year = 2024 AND quarter = 1 ORDER BY r, p

-- name: length-notes
SELECT max(length(notes)) AS longest, min(length(notes)) AS shortest, avg(length(notes)) AS mean FROM sales_demo

-- name: substr-notes
SELECT id, substr(notes, 1, 40) AS snippet FROM sales_demo ORDER BY id LIMIT 5

-- name: replace-trim
SELECT DISTINCT trim(replace(product, 'Pulse', 'P.')) AS p FROM sales_demo ORDER BY p

-- name: like-filter
SELECT count(*) FROM sales_demo WHERE product LIKE 'Aurora%'

-- name: untrusted-notes
SELECT id, notes FROM sales_demo WHERE notes LIKE '%INSTRUCTIONS%' ORDER BY id LIMIT 5

-- name: round-avg
SELECT region, round(avg(revenue), 2) AS avg_rev FROM sales_demo GROUP BY region ORDER BY region

-- name: abs-diff
SELECT id, abs(units - 20) AS dist FROM sales_demo ORDER BY dist, id LIMIT 5

-- name: min-max
SELECT min(revenue), max(revenue), min(units), max(units) FROM sales_demo

-- name: between
SELECT count(*) FROM sales_demo WHERE revenue BETWEEN 1000 AND 5000

-- name: in-list
SELECT region, count(*) FROM sales_demo WHERE region IN ('Europe', 'Latin America') GROUP BY region ORDER BY region

-- name: order-multi
SELECT region, year, sum(units) AS u FROM sales_demo GROUP BY region, year ORDER BY region ASC, u DESC

-- name: limit-offset
SELECT id FROM sales_demo ORDER BY id LIMIT 5 OFFSET 10

-- name: many-rows-capped
SELECT id, region, units FROM sales_demo ORDER BY id

-- name: conditional-aggregation
SELECT product,
  sum(CASE WHEN year = 2023 THEN revenue ELSE 0 END) AS y2023,
  sum(CASE WHEN year = 2024 THEN revenue ELSE 0 END) AS y2024
FROM sales_demo GROUP BY product ORDER BY product

-- name: group-by-expression
SELECT units / 100 AS bucket, count(*) AS n FROM sales_demo GROUP BY units / 100 ORDER BY bucket

-- name: order-by-alias
SELECT product, sum(units) AS total_units FROM sales_demo GROUP BY product ORDER BY total_units DESC LIMIT 5

-- name: ratio
SELECT product, round(sum(revenue) / sum(units), 2) AS price_per_unit FROM sales_demo GROUP BY product ORDER BY product

-- name: binary-receipts
SELECT id, receipt FROM sales_demo ORDER BY id LIMIT 3

-- name: vector-column
SELECT id, name, embedding FROM product_vectors ORDER BY id LIMIT 3

-- name: long-notes
SELECT id, notes FROM sales_demo ORDER BY length(notes) DESC, id LIMIT 2

-- name: vectors-count
SELECT count(*) AS n, count(DISTINCT name) AS names FROM product_vectors

-- name: vectors-like
SELECT name FROM product_vectors WHERE name LIKE 'Halo%' ORDER BY id LIMIT 5

-- name: nested-from
SELECT avg(n) FROM (SELECT region, year, count(*) AS n FROM sales_demo GROUP BY region, year) t

-- name: multiple-ctes
WITH a AS (SELECT region, count(*) AS n FROM sales_demo GROUP BY region),
     b AS (SELECT region, sum(units) AS u FROM sales_demo GROUP BY region)
SELECT a.region, a.n, b.u FROM a JOIN b ON a.region = b.region ORDER BY a.region

-- name: case-in-order-by
SELECT region FROM sales_demo GROUP BY region ORDER BY CASE WHEN region = 'Europe' THEN 0 ELSE 1 END, region

-- name: max-year-subquery
SELECT count(*) FROM sales_demo WHERE year = (SELECT max(year) FROM sales_demo)

-- name: arithmetic
SELECT 1 + 2 * 3 AS a, 10 / 4 AS b, 7 - 10 AS c

-- name: union-order-limit
SELECT product AS name FROM sales_demo UNION SELECT name FROM product_vectors ORDER BY name LIMIT 7

-- name: distinct-order
SELECT DISTINCT year FROM sales_demo ORDER BY year DESC

-- name: trailing-semicolon
SELECT count(*) AS n FROM sales_demo;

-- name: line-comment
-- a comment the agent wrote
SELECT region, count(*) FROM sales_demo -- per region
GROUP BY region ORDER BY region

-- name: pg-percentile
-- dialects: postgres
SELECT region, percentile_cont(0.5) WITHIN GROUP (ORDER BY revenue) AS median FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-mode
-- dialects: postgres
SELECT mode() WITHIN GROUP (ORDER BY product) FROM sales_demo

-- name: pg-string-agg
-- dialects: postgres
SELECT region, string_agg(DISTINCT product, ', ' ORDER BY product) FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-array-agg
-- dialects: postgres
SELECT year, array_agg(DISTINCT quarter ORDER BY quarter) FROM sales_demo GROUP BY year ORDER BY year

-- name: pg-filter
-- dialects: postgres, sqlite
SELECT region, count(*) FILTER (WHERE units > 100) AS big FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-distinct-on
-- dialects: postgres
SELECT DISTINCT ON (region) region, product, revenue FROM sales_demo ORDER BY region, revenue DESC, id

-- name: pg-generate-series
-- dialects: postgres
SELECT g AS year, count(s.id) FROM generate_series(2020, 2025) g LEFT JOIN sales_demo s ON s.year = g GROUP BY g ORDER BY g

-- name: pg-rollup
-- dialects: postgres
SELECT region, year, sum(units) FROM sales_demo GROUP BY ROLLUP (region, year) ORDER BY region NULLS LAST, year NULLS LAST

-- name: pg-grouping-sets
-- dialects: postgres
SELECT region, product, count(*) FROM sales_demo GROUP BY GROUPING SETS ((region), (product)) ORDER BY 1, 2

-- name: pg-rollup-string-agg
-- dialects: postgres
SELECT region, string_agg(DISTINCT product, ', ' ORDER BY product) AS products FROM sales_demo GROUP BY ROLLUP (region) ORDER BY region NULLS LAST

-- name: pg-format-report-line
-- dialects: postgres
SELECT format('%-10s|%6s|%s', region, year, product) AS line, region || ' / ' || product AS label, to_json(product) AS j FROM sales_demo ORDER BY 1 LIMIT 5

-- name: pg-cte-read-twice
-- dialects: postgres
WITH totals AS (SELECT region, string_agg(product, ',') AS products, sum(units) AS units FROM sales_demo GROUP BY region) SELECT a.region, b.region, a.units + b.units AS pair FROM totals a JOIN totals b ON a.region < b.region ORDER BY 1, 2

-- name: pg-regexp
-- dialects: postgres
SELECT DISTINCT regexp_replace(product, '\s+\d+$', '') AS family FROM sales_demo ORDER BY family

-- name: pg-split-part
-- dialects: postgres
SELECT DISTINCT split_part(product, ' ', 1) AS brand FROM sales_demo ORDER BY brand

-- name: pg-ilike
-- dialects: postgres
SELECT count(*) FROM sales_demo WHERE notes ILIKE '%warranty%'

-- name: pg-cast-numeric
-- dialects: postgres
SELECT region, round(avg(revenue)::numeric, 1) AS r, sum(units)::bigint AS u FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-make-date
-- dialects: postgres
SELECT make_date(year, quarter * 3 - 2, 1) AS period, sum(revenue) FROM sales_demo GROUP BY 1 ORDER BY 1 LIMIT 8

-- name: pg-date-trunc
-- dialects: postgres
SELECT date_trunc('year', make_date(year, 1, 1)) AS y, count(*) FROM sales_demo GROUP BY 1 ORDER BY 1

-- name: pg-extract
-- dialects: postgres
SELECT extract(year FROM make_date(year, 6, 1)) AS y, count(*) FROM sales_demo GROUP BY 1 ORDER BY 1

-- name: pg-now-interval
-- dialects: postgres
-- compare: no
SELECT now() - interval '1 day' > now() - interval '2 days' AS ok, current_date

-- name: pg-to-char
-- dialects: postgres
SELECT to_char(sum(revenue), 'FM999G999G999D00') FROM sales_demo

-- name: pg-lateral
-- dialects: postgres
SELECT r.region, t.product, t.revenue FROM (SELECT DISTINCT region FROM sales_demo) r,
LATERAL (SELECT product, revenue FROM sales_demo s WHERE s.region = r.region ORDER BY revenue DESC, id LIMIT 1) t ORDER BY r.region

-- name: pg-unnest
-- dialects: postgres
SELECT u, count(*) FROM (SELECT unnest(ARRAY[year, quarter]) AS u FROM sales_demo) t GROUP BY u ORDER BY u

-- name: pg-array-length
-- dialects: postgres
SELECT id, array_length(embedding, 1) AS dims, round(embedding[1]::numeric, 3) AS first FROM product_vectors ORDER BY id LIMIT 3

-- name: pg-jsonb
-- dialects: postgres
SELECT jsonb_build_object('region', region, 'deals', count(*)) FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-json-agg
-- dialects: postgres
SELECT json_agg(product ORDER BY product) FROM (SELECT DISTINCT product FROM sales_demo) p

-- name: pg-json-operator
-- dialects: postgres
SELECT j->>'region' AS region FROM (SELECT jsonb_build_object('region', region) AS j FROM sales_demo LIMIT 3) t ORDER BY 1

-- name: pg-random-sample
-- dialects: postgres
-- compare: no
SELECT id FROM sales_demo ORDER BY random() LIMIT 5

-- name: pg-stats
-- dialects: postgres
SELECT stddev(revenue), variance(units), corr(units, revenue), regr_slope(revenue, units) FROM sales_demo

-- name: pg-bool-and
-- dialects: postgres
SELECT region, bool_and(units > 0), bool_or(units > 1000), every(revenue > 0) FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-width-bucket
-- dialects: postgres
SELECT width_bucket(revenue, 0, 100000, 10) AS b, count(*) FROM sales_demo GROUP BY 1 ORDER BY 1

-- name: pg-greatest
-- dialects: postgres, mysql
SELECT greatest(max(units), 1000) AS g, least(min(units), 0) AS l FROM sales_demo

-- name: pg-format
-- dialects: postgres
SELECT format('%s: %s deals', region, count(*)) FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-values
-- dialects: postgres, sqlite
SELECT v.column1 AS region, v.column2 AS target FROM (VALUES ('Europe', 1), ('Asia Pacific', 2)) AS v ORDER BY 1

-- name: pg-values-top
-- dialects: postgres, sqlite
VALUES (1, 'a'), (2, 'b')

-- name: pg-table-size
-- dialects: postgres
SELECT pg_size_pretty(pg_total_relation_size('sales_demo')) IS NOT NULL AS has_size

-- name: pg-concat-operator
-- dialects: postgres, sqlite
SELECT region || ' / ' || product AS label FROM sales_demo ORDER BY id LIMIT 3

-- name: pg-fetch-first
-- dialects: postgres
SELECT id FROM sales_demo ORDER BY id OFFSET 3 ROWS FETCH FIRST 4 ROWS ONLY

-- name: sqlite-strftime
-- dialects: sqlite
-- compare: no
SELECT strftime('%Y', 'now') >= '2024' AS ok, date('now') IS NOT NULL AS d

-- name: sqlite-printf
-- dialects: sqlite
SELECT printf('%s: %d', region, count(*)) FROM sales_demo GROUP BY region ORDER BY region

-- name: sqlite-group-concat
-- dialects: sqlite
SELECT year, group_concat(DISTINCT quarter) FROM sales_demo GROUP BY year ORDER BY year

-- name: sqlite-iif-instr
-- dialects: sqlite
SELECT iif(instr(product, 'Phone') > 0, 'phone', 'other') AS kind, count(*) FROM sales_demo GROUP BY 1 ORDER BY 1

-- name: sqlite-total
-- dialects: sqlite
SELECT total(units) FROM sales_demo

-- name: sqlite-json-extract
-- dialects: sqlite
SELECT id, json_array_length(embedding) AS dims, round(json_extract(embedding, '$[0]'), 3) AS first FROM product_vectors ORDER BY id LIMIT 3

-- name: sqlite-json-each
-- dialects: sqlite
SELECT count(*) FROM product_vectors, json_each(product_vectors.embedding) WHERE product_vectors.id <= 2

-- name: sqlite-typeof-hex
-- dialects: sqlite
SELECT typeof(receipt), length(receipt), substr(hex(receipt), 1, 8) FROM sales_demo ORDER BY id LIMIT 3

-- name: sqlite-random
-- dialects: sqlite
-- compare: no
SELECT id FROM sales_demo ORDER BY random() LIMIT 3

-- name: sqlite-pragma-function
-- dialects: sqlite
SELECT name, type FROM pragma_table_info('sales_demo') ORDER BY cid

-- name: mysql-group-concat
-- dialects: mysql
SELECT year, GROUP_CONCAT(DISTINCT quarter ORDER BY quarter SEPARATOR ',') AS q FROM sales_demo GROUP BY year ORDER BY year

-- name: mysql-if
-- dialects: mysql
SELECT IF(units > 100, 'big', 'small') AS size, count(*) FROM sales_demo GROUP BY size ORDER BY size

-- name: mysql-date-format
-- dialects: mysql
SELECT DATE_FORMAT(MAKEDATE(year, 1), '%Y') AS y, count(*) FROM sales_demo GROUP BY y ORDER BY y

-- name: mysql-concat-ws
-- dialects: mysql
SELECT CONCAT_WS(' / ', region, product) AS label FROM sales_demo ORDER BY id LIMIT 3

-- name: mysql-json-length
-- dialects: mysql
SELECT id, JSON_LENGTH(embedding) AS dims, ROUND(JSON_EXTRACT(embedding, '$[0]'), 3) AS first FROM product_vectors ORDER BY id LIMIT 3

-- name: mysql-rollup
-- dialects: mysql
SELECT region, sum(units) FROM sales_demo GROUP BY region WITH ROLLUP

-- name: mysql-dual
-- dialects: mysql
SELECT 1 + 1 AS two FROM DUAL

-- name: mysql-lpad-left
-- dialects: mysql
SELECT LPAD(id, 6, '0') AS code, LEFT(product, 5) AS short FROM sales_demo ORDER BY id LIMIT 3

-- name: mysql-locate
-- dialects: mysql
SELECT count(*) FROM sales_demo WHERE LOCATE('warranty', notes) > 0

-- name: mysql-hex-length
-- dialects: mysql
SELECT LENGTH(receipt), SUBSTR(HEX(receipt), 1, 8) FROM sales_demo ORDER BY id LIMIT 3

-- name: mysql-now
-- dialects: mysql
-- compare: no
SELECT NOW() > '2020-01-01' AS ok, CURDATE() IS NOT NULL AS d

-- name: mysql-rand
-- dialects: mysql
-- compare: no
SELECT id FROM sales_demo ORDER BY RAND() LIMIT 3

-- name: mysql-cast-decimal
-- dialects: mysql
SELECT region, CAST(avg(revenue) AS DECIMAL(12, 1)) AS r FROM sales_demo GROUP BY region ORDER BY region

-- name: mysql-backticks
-- dialects: mysql
SELECT `region`, count(*) AS `n` FROM `sales_demo` GROUP BY `region` ORDER BY `region`

-- name: mysql-limit-comma
-- dialects: mysql
SELECT id FROM sales_demo ORDER BY id LIMIT 10, 5

-- name: duplicate-column-names
SELECT a.id, b.id FROM sales_demo a JOIN sales_demo b ON b.id = a.id + 1 ORDER BY a.id LIMIT 3

-- name: pg-named-arguments
-- dialects: postgres
SELECT make_interval(days := 10) AS ten_days, make_interval(weeks => 1) AS one_week

-- name: mysql-regexp-filter
-- dialects: mysql
SELECT region, count(*) AS n FROM sales_demo WHERE region REGEXP '^(Europe|Asia)' AND product NOT RLIKE '[0-9]$' GROUP BY region ORDER BY region

-- name: mysql-regexp-output
-- dialects: mysql
SELECT DISTINCT region, region REGEXP 'America' AS americas FROM sales_demo ORDER BY region

-- Round two (issue 10): the false refusals found by the evaluation, and more of what analysts write.

-- name: pg-gen-random-uuid
-- dialects: postgres
-- compare: no
SELECT gen_random_uuid() AS id, length(gen_random_uuid()::text) AS n

-- name: pg-order-by-using
-- dialects: postgres
SELECT DISTINCT product FROM sales_demo ORDER BY product USING ~<~

-- name: pg-order-by-using-greater
-- dialects: postgres
SELECT region, sum(units) AS u FROM sales_demo GROUP BY region ORDER BY sum(units) USING >, region

-- name: pg-string-agg-using
-- dialects: postgres
SELECT region, string_agg(DISTINCT product, ', ' ORDER BY product USING ~>~) AS products FROM sales_demo GROUP BY region ORDER BY region

-- name: pg-tablesample-repeatable-expression
-- dialects: postgres
-- compare: no
SELECT count(*) > 0 AS sampled FROM sales_demo TABLESAMPLE BERNOULLI (50) REPEATABLE (1 + 1)

-- name: values-rows
-- dialects: postgres, sqlite, mysql
VALUES (1, 'one'), (2, 'two'), (3, 'three')

-- name: pg-backslash-literal
-- dialects: postgres, sqlite
SELECT 'C:\' AS folder, length('C:\') AS n, 'a\b' || 'c' AS joined

-- name: mysql-backslash-literal
-- dialects: mysql
SELECT 'C:\\' AS folder, LENGTH('C:\\') AS n, CONCAT('a\\b', 'c') AS joined

-- name: mariadb-median-window
-- dialects: mysql
SELECT DISTINCT region, MEDIAN(revenue) OVER (PARTITION BY region) AS median_revenue FROM sales_demo ORDER BY region

-- name: mariadb-percentile-window
-- dialects: mysql
SELECT DISTINCT region, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY revenue) OVER (PARTITION BY region) AS p90 FROM sales_demo ORDER BY region

-- name: mysql-group-concat-limit
-- dialects: mysql
SELECT region, GROUP_CONCAT(product ORDER BY revenue DESC, id SEPARATOR '; ' LIMIT 3) AS top3 FROM sales_demo GROUP BY region ORDER BY region

-- name: mysql-group-concat-distinct-limit
-- dialects: mysql
SELECT year, GROUP_CONCAT(DISTINCT product ORDER BY product LIMIT 2) AS first_two FROM sales_demo GROUP BY year ORDER BY year

-- name: sqlite-fts5-match
-- dialects: sqlite
SELECT rowid, bm25(notes_fts) < 0 AS scored FROM notes_fts WHERE notes_fts MATCH 'warranty' ORDER BY rank, rowid LIMIT 5

-- name: sqlite-fts5-highlight
-- dialects: sqlite
SELECT s.id, highlight(notes_fts, 0, '[', ']') AS hit FROM notes_fts JOIN sales_demo s ON s.id = notes_fts.rowid WHERE notes_fts MATCH 'customs AND paperwork' ORDER BY s.id LIMIT 3

-- name: sqlite-fts5-table-call
-- dialects: sqlite
SELECT count(*) AS hits FROM notes_fts('burn NEAR in')

-- name: cohort-by-first-year
WITH first_seen AS (SELECT product, min(year) AS cohort FROM sales_demo GROUP BY product),
activity AS (SELECT DISTINCT product, year FROM sales_demo)
SELECT f.cohort, a.year - f.cohort AS years_since, count(*) AS products
FROM first_seen f JOIN activity a ON a.product = f.product
GROUP BY f.cohort, a.year - f.cohort
ORDER BY f.cohort, years_since

-- name: retention-next-quarter
WITH periods AS (SELECT DISTINCT region, product, year * 4 + quarter AS p FROM sales_demo)
SELECT a.p AS period, count(*) AS active, count(b.p) AS retained_next
FROM periods a LEFT JOIN periods b ON b.region = a.region AND b.product = a.product AND b.p = a.p + 1
GROUP BY a.p
ORDER BY a.p

-- name: pivot-years-with-case
SELECT region,
  sum(CASE WHEN year = 2021 THEN revenue ELSE 0 END) AS y2021,
  sum(CASE WHEN year = 2022 THEN revenue ELSE 0 END) AS y2022,
  sum(CASE WHEN year = 2023 THEN revenue ELSE 0 END) AS y2023,
  sum(CASE WHEN year = 2024 THEN revenue ELSE 0 END) AS y2024
FROM sales_demo GROUP BY region ORDER BY region

-- name: top2-products-per-year-cte
WITH ranked AS (
  SELECT year, product, sum(revenue) AS rev,
         rank() OVER (PARTITION BY year ORDER BY sum(revenue) DESC) AS r
  FROM sales_demo GROUP BY year, product
)
SELECT year, product, rev FROM ranked WHERE r <= 2 ORDER BY year, r, product

-- name: quarter-over-quarter-growth
WITH q AS (SELECT year, quarter, sum(revenue) AS rev FROM sales_demo GROUP BY year, quarter)
SELECT year, quarter, rev, rev - lag(rev) OVER (ORDER BY year, quarter) AS delta,
       round(100.0 * (rev - lag(rev) OVER (ORDER BY year, quarter)) / lag(rev) OVER (ORDER BY year, quarter), 2) AS pct
FROM q ORDER BY year, quarter

-- name: moving-average-3
SELECT year, quarter, q_units,
       avg(q_units) OVER (ORDER BY year, quarter ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS ma3
FROM (SELECT year, quarter, sum(units) AS q_units FROM sales_demo GROUP BY year, quarter) t
ORDER BY year, quarter

-- name: share-of-region-within-year
SELECT year, region, sum(revenue) AS rev,
       round(100.0 * sum(revenue) / sum(sum(revenue)) OVER (PARTITION BY year), 2) AS pct_of_year
FROM sales_demo GROUP BY year, region ORDER BY year, rev DESC

-- name: string-cleanup
SELECT DISTINCT lower(trim(replace(product, ' ', '_'))) AS slug, upper(substr(region, 1, 3)) AS code
FROM sales_demo ORDER BY slug, code

-- name: deals-with-keyword-counts
SELECT region, count(*) AS deals, sum(CASE WHEN notes LIKE '%warranty%' THEN 1 ELSE 0 END) AS warranty_mentions
FROM sales_demo GROUP BY region ORDER BY region

-- name: percentile-by-rank
WITH ordered AS (
  SELECT region, revenue, row_number() OVER (PARTITION BY region ORDER BY revenue, id) AS rn,
         count(*) OVER (PARTITION BY region) AS n
  FROM sales_demo
)
SELECT region, min(revenue) AS p90_floor FROM ordered WHERE rn >= 0.9 * n GROUP BY region ORDER BY region

-- name: pg-date-bucket-quarter
-- dialects: postgres
SELECT date_trunc('quarter', make_date(year, quarter * 3 - 2, 1))::date AS bucket, sum(revenue) AS rev
FROM sales_demo GROUP BY 1 ORDER BY 1

-- name: pg-percentile-disc-by-year
-- dialects: postgres
SELECT year, percentile_disc(0.5) WITHIN GROUP (ORDER BY units) AS median_units,
       percentile_cont(ARRAY[0.25, 0.75]) WITHIN GROUP (ORDER BY revenue) AS quartiles
FROM sales_demo GROUP BY year ORDER BY year

-- name: pg-jsonb-extract
-- dialects: postgres
SELECT d->>'region' AS region, (d->>'units')::int AS units FROM (
  SELECT jsonb_build_object('region', region, 'units', sum(units)) AS d FROM sales_demo GROUP BY region) t ORDER BY 1

-- name: mysql-date-bucket
-- dialects: mysql
SELECT DATE_FORMAT(STR_TO_DATE(CONCAT(year, '-', quarter * 3 - 2, '-01'), '%Y-%c-%d'), '%Y-%m') AS bucket, SUM(revenue) AS rev
FROM sales_demo GROUP BY bucket ORDER BY bucket

-- name: mysql-json-extract
-- dialects: mysql
SELECT JSON_UNQUOTE(JSON_EXTRACT(JSON_OBJECT('r', region), '$.r')) AS region, JSON_LENGTH(JSON_ARRAY(year, quarter)) AS n
FROM sales_demo GROUP BY region, year, quarter ORDER BY region, year, quarter LIMIT 5

-- name: mysql-embedding-json
-- dialects: mysql
SELECT id, JSON_LENGTH(embedding) AS dims, ROUND(JSON_EXTRACT(embedding, '$[0]'), 3) AS first FROM product_vectors ORDER BY id LIMIT 3

-- name: sqlite-date-bucket
-- dialects: sqlite
SELECT strftime('%Y-%m', printf('%d-%02d-01', year, quarter * 3 - 2)) AS bucket, sum(revenue) AS rev
FROM sales_demo GROUP BY bucket ORDER BY bucket

-- name: sqlite-json-arrow
-- dialects: sqlite
SELECT json_object('r', region) ->> '$.r' AS region, json_array_length(json_array(year, quarter)) AS n
FROM sales_demo GROUP BY region ORDER BY region

-- name: sqlite-embedding-json
-- dialects: sqlite
SELECT id, json_array_length(embedding) AS dims, round(json_extract(embedding, '$[0]'), 3) AS first FROM product_vectors ORDER BY id LIMIT 3

-- name: mysql-computed-date-format
-- dialects: mysql
SELECT id, DATE_FORMAT(MAKEDATE(year, quarter * 80), CONCAT('%W ', '%d %M')) AS label, STR_TO_DATE(CONCAT('01/', '02/2024'), CONCAT('%d/', '%m/%Y')) AS parsed FROM sales_demo ORDER BY id

-- name: pg-label-chain
-- dialects: postgres
SELECT id, region || ' / ' || product || ' / ' || year || '-Q' || quarter || ' (' || units || ' units)' AS label FROM sales_demo ORDER BY id LIMIT 5

-- name: pg-words-of-notes
-- dialects: postgres
SELECT id, cardinality(string_to_array(coalesce(notes, ''), ' ')) AS words, string_to_array(product, NULL) AS letters FROM sales_demo ORDER BY id LIMIT 5

-- name: pg-regexp-matches-all
-- dialects: postgres
SELECT id, m[1] AS word FROM sales_demo, regexp_matches(coalesce(notes, ''), '([A-Za-z]{5,})', 'g') AS m WHERE id <= 3 ORDER BY id, word

-- name: pg-regexp-count-vowels
-- dialects: postgres
SELECT product, regexp_count(product, '[aeiou]') AS vowels, regexp_substr(product, '[A-Z][a-z]+', 1, 1) AS first_word FROM sales_demo GROUP BY product ORDER BY product

-- name: pg-pivot-jsonb-object-agg
-- dialects: postgres
SELECT region, jsonb_object_agg(year, revenue) AS by_year FROM (SELECT region, year, sum(revenue) AS revenue FROM sales_demo GROUP BY region, year) t GROUP BY region ORDER BY region

-- name: pg-jsonb-object-of-arrays
-- dialects: postgres
SELECT jsonb_object(array_agg(DISTINCT region ORDER BY region), array_agg(DISTINCT region ORDER BY region)) AS regions FROM sales_demo
