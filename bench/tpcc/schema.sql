-- TPC-C schema (spec clause 1.3) plus CH-benCHmark's supplier, nation and region.
--
-- psql variables:  am  the table access method for every table, e.g. -v am=heap or -v am=anker.
-- Only plain column types and USING are used (no storage parameters, no heap-specific options),
-- so the same file builds heap or anker tables. Primary keys and secondary indexes are created
-- by indexes.sql after loading.

DROP TABLE IF EXISTS warehouse, district, customer, history, new_order, orders, order_line,
                     item, stock, supplier, nation, region CASCADE;

CREATE TABLE warehouse (
    w_id        int           NOT NULL,
    w_name      varchar(10)   NOT NULL,
    w_street_1  varchar(20)   NOT NULL,
    w_street_2  varchar(20)   NOT NULL,
    w_city      varchar(20)   NOT NULL,
    w_state     char(2)       NOT NULL,
    w_zip       char(9)       NOT NULL,
    w_tax       numeric(4,4)  NOT NULL,
    w_ytd       numeric(12,2) NOT NULL
) USING :am;

CREATE TABLE district (
    d_id        int           NOT NULL,
    d_w_id      int           NOT NULL,
    d_name      varchar(10)   NOT NULL,
    d_street_1  varchar(20)   NOT NULL,
    d_street_2  varchar(20)   NOT NULL,
    d_city      varchar(20)   NOT NULL,
    d_state     char(2)       NOT NULL,
    d_zip       char(9)       NOT NULL,
    d_tax       numeric(4,4)  NOT NULL,
    d_ytd       numeric(12,2) NOT NULL,
    d_next_o_id int           NOT NULL
) USING :am;

CREATE TABLE customer (
    c_id           int           NOT NULL,
    c_d_id         int           NOT NULL,
    c_w_id         int           NOT NULL,
    c_first        varchar(16)   NOT NULL,
    c_middle       char(2)       NOT NULL,
    c_last         varchar(16)   NOT NULL,
    c_street_1     varchar(20)   NOT NULL,
    c_street_2     varchar(20)   NOT NULL,
    c_city         varchar(20)   NOT NULL,
    c_state        char(2)       NOT NULL,
    c_zip          char(9)       NOT NULL,
    c_phone        char(16)      NOT NULL,
    c_since        timestamp     NOT NULL,
    c_credit       char(2)       NOT NULL,
    c_credit_lim   numeric(12,2) NOT NULL,
    c_discount     numeric(4,4)  NOT NULL,
    c_balance      numeric(12,2) NOT NULL,
    c_ytd_payment  numeric(12,2) NOT NULL,
    c_payment_cnt  int           NOT NULL,
    c_delivery_cnt int           NOT NULL,
    c_data         varchar(500)  NOT NULL
) USING :am;

-- The spec gives HISTORY no primary key.
CREATE TABLE history (
    h_c_id   int          NOT NULL,
    h_c_d_id int          NOT NULL,
    h_c_w_id int          NOT NULL,
    h_d_id   int          NOT NULL,
    h_w_id   int          NOT NULL,
    h_date   timestamp    NOT NULL,
    h_amount numeric(6,2) NOT NULL,
    h_data   varchar(24)  NOT NULL
) USING :am;

CREATE TABLE new_order (
    no_o_id int NOT NULL,
    no_d_id int NOT NULL,
    no_w_id int NOT NULL
) USING :am;

CREATE TABLE orders (
    o_id         int       NOT NULL,
    o_d_id       int       NOT NULL,
    o_w_id       int       NOT NULL,
    o_c_id       int       NOT NULL,
    o_entry_d    timestamp NOT NULL,
    o_carrier_id int,                    -- NULL until delivered
    o_ol_cnt     int       NOT NULL,
    o_all_local  int       NOT NULL
) USING :am;

CREATE TABLE order_line (
    ol_o_id        int          NOT NULL,
    ol_d_id        int          NOT NULL,
    ol_w_id        int          NOT NULL,
    ol_number      int          NOT NULL,
    ol_i_id        int          NOT NULL,
    ol_supply_w_id int          NOT NULL,
    ol_delivery_d  timestamp,            -- NULL until delivered
    ol_quantity    int          NOT NULL,
    ol_amount      numeric(6,2) NOT NULL,
    ol_dist_info   char(24)     NOT NULL
) USING :am;

CREATE TABLE item (
    i_id    int          NOT NULL,
    i_im_id int          NOT NULL,
    i_name  varchar(24)  NOT NULL,
    i_price numeric(5,2) NOT NULL,
    i_data  varchar(50)  NOT NULL
) USING :am;

CREATE TABLE stock (
    s_i_id       int          NOT NULL,
    s_w_id       int          NOT NULL,
    s_quantity   int          NOT NULL,
    s_dist_01    char(24)     NOT NULL,
    s_dist_02    char(24)     NOT NULL,
    s_dist_03    char(24)     NOT NULL,
    s_dist_04    char(24)     NOT NULL,
    s_dist_05    char(24)     NOT NULL,
    s_dist_06    char(24)     NOT NULL,
    s_dist_07    char(24)     NOT NULL,
    s_dist_08    char(24)     NOT NULL,
    s_dist_09    char(24)     NOT NULL,
    s_dist_10    char(24)     NOT NULL,
    s_ytd        numeric(8,0) NOT NULL,
    s_order_cnt  int          NOT NULL,
    s_remote_cnt int          NOT NULL,
    s_data       varchar(50)  NOT NULL
) USING :am;

-- CH-benCHmark additions (Cole et al., "The mixed workload CH-benCHmark", DBTest 2011).
-- Rows are joined to TPC-C rows as the CH queries do:
--   stock -> supplier:   mod(s_w_id * s_i_id, 10000) = su_suppkey
--   customer -> nation:  ascii(substr(c_state, 1, 1)) = n_nationkey
CREATE TABLE supplier (
    su_suppkey   int            NOT NULL,
    su_name      char(25)       NOT NULL,
    su_address   varchar(40)    NOT NULL,
    su_nationkey int            NOT NULL,
    su_phone     char(15)       NOT NULL,
    su_acctbal   numeric(12,2)  NOT NULL,
    su_comment   char(100)      NOT NULL
) USING :am;

CREATE TABLE nation (
    n_nationkey int       NOT NULL,
    n_name      char(25)  NOT NULL,
    n_regionkey int       NOT NULL,
    n_comment   char(152) NOT NULL
) USING :am;

CREATE TABLE region (
    r_regionkey int       NOT NULL,
    r_name      char(55)  NOT NULL,
    r_comment   char(152) NOT NULL
) USING :am;

-- Benchmark bookkeeping, not part of TPC-C: one row per NewOrder rolled back through the
-- unused item id (clause 2.4.1.4). Always heap: it only counts.
DROP TABLE IF EXISTS tpcc_rollbacks;
CREATE TABLE tpcc_rollbacks (
    w_id int         NOT NULL,
    d_id int         NOT NULL,
    at   timestamptz NOT NULL DEFAULT clock_timestamp()
) USING heap;

-- C_LAST from a number 0..999 (clause 4.3.2.3): one syllable per decimal digit.
-- Used by the loader and by Payment/OrderStatus, which receive the number from pgbench.
CREATE OR REPLACE FUNCTION tpcc_lastname(n int) RETURNS varchar(16)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ((ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[n / 100 + 1]
         || (ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[(n / 10) % 10 + 1]
         || (ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[n % 10 + 1])::varchar(16)
$$;
