-- TPC-C consistency conditions (spec clause 3.3.2.1 - 3.3.2.6), as one read-only SELECT,
-- so it is evaluated on one snapshot. Every condition holds in any transaction-consistent
-- state, so this may also run while the OLTP workload runs (the driver does that with
-- --online-check, which is how it tests that OLAP snapshots are consistent).
--
-- Output: one row per condition: condition | violations | checked | first violation (or '').
-- The driver fails if any violations column is non-zero. Conditions 1-4 are the ones the spec
-- requires; 5 and 6 are checked as well because they are cheap at benchmark scale.
-- A district whose NEW-ORDER rows were all delivered has no MAX(NO_O_ID); conditions 2 and 3
-- then only compare what exists.

WITH
c1 AS (
    SELECT w_id, w_ytd, d.s
    FROM warehouse
    JOIN (SELECT d_w_id, sum(d_ytd) AS s FROM district GROUP BY d_w_id) AS d ON d.d_w_id = w_id
),
o AS (SELECT o_w_id, o_d_id, max(o_id) AS max_o, sum(o_ol_cnt) AS sum_ol FROM orders GROUP BY 1, 2),
n AS (SELECT no_w_id, no_d_id, max(no_o_id) AS max_no, min(no_o_id) AS min_no, count(*) AS cnt
      FROM new_order GROUP BY 1, 2),
l AS (SELECT ol_w_id, ol_d_id, count(*) AS cnt FROM order_line GROUP BY 1, 2),
dist AS (
    SELECT d_w_id, d_id, d_next_o_id, o.max_o, o.sum_ol, n.max_no, n.min_no,
           coalesce(n.cnt, 0) AS no_cnt, coalesce(l.cnt, 0) AS ol_cnt
    FROM district
    LEFT JOIN o ON o.o_w_id = d_w_id AND o.o_d_id = d_id
    LEFT JOIN n ON n.no_w_id = d_w_id AND n.no_d_id = d_id
    LEFT JOIN l ON l.ol_w_id = d_w_id AND l.ol_d_id = d_id
),
c5 AS (
    SELECT o_w_id, o_d_id, o_id, o_carrier_id, no_o_id
    FROM orders LEFT JOIN new_order ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id
    WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT NULL)
),
c6 AS (
    SELECT o_w_id, o_d_id, o_id, o_ol_cnt, coalesce(cnt, 0) AS cnt
    FROM orders
    LEFT JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, count(*) AS cnt FROM order_line GROUP BY 1, 2, 3) AS x
           ON x.ol_w_id = o_w_id AND x.ol_d_id = o_d_id AND x.ol_o_id = o_id
    WHERE o_ol_cnt <> coalesce(cnt, 0)
)
SELECT '1 W_YTD = sum(D_YTD)' AS condition,
       count(*) FILTER (WHERE w_ytd <> s) AS violations,
       count(*) AS checked,
       coalesce(min(format('w_id=%s w_ytd=%s sum(d_ytd)=%s', w_id, w_ytd, s)) FILTER (WHERE w_ytd <> s), '')
FROM c1
UNION ALL
SELECT '2 D_NEXT_O_ID-1 = max(O_ID) = max(NO_O_ID)',
       count(*) FILTER (WHERE bad), count(*),
       coalesce(min(format('w=%s d=%s d_next_o_id=%s max(o_id)=%s max(no_o_id)=%s',
                           d_w_id, d_id, d_next_o_id, max_o, max_no)) FILTER (WHERE bad), '')
FROM (SELECT *, (d_next_o_id - 1 IS DISTINCT FROM max_o)
                OR (max_no IS NOT NULL AND max_no <> max_o) AS bad FROM dist) AS x
UNION ALL
SELECT '3 max(NO_O_ID)-min(NO_O_ID)+1 = count(NEW-ORDER)',
       count(*) FILTER (WHERE bad), count(*),
       coalesce(min(format('w=%s d=%s max=%s min=%s count=%s', d_w_id, d_id, max_no, min_no, no_cnt))
                FILTER (WHERE bad), '')
FROM (SELECT *, coalesce(max_no - min_no + 1, 0) <> no_cnt AS bad FROM dist) AS x
UNION ALL
SELECT '4 sum(O_OL_CNT) = count(ORDER-LINE)',
       count(*) FILTER (WHERE bad), count(*),
       coalesce(min(format('w=%s d=%s sum(o_ol_cnt)=%s count(order_line)=%s', d_w_id, d_id, sum_ol, ol_cnt))
                FILTER (WHERE bad), '')
FROM (SELECT *, coalesce(sum_ol, 0) <> ol_cnt AS bad FROM dist) AS x
UNION ALL
SELECT '5 O_CARRIER_ID IS NULL <=> NEW-ORDER row exists',
       (SELECT count(*) FROM c5), (SELECT count(*) FROM orders),
       coalesce((SELECT format('w=%s d=%s o_id=%s o_carrier_id=%s no_o_id=%s',
                               o_w_id, o_d_id, o_id, o_carrier_id, no_o_id) FROM c5 LIMIT 1), '')
UNION ALL
SELECT '6 O_OL_CNT = count(ORDER-LINE) per order',
       (SELECT count(*) FROM c6), (SELECT count(*) FROM orders),
       coalesce((SELECT format('w=%s d=%s o_id=%s o_ol_cnt=%s lines=%s', o_w_id, o_d_id, o_id, o_ol_cnt, cnt)
                 FROM c6 LIMIT 1), '');
