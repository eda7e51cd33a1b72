-- Primary keys (spec clause 1.3) and the secondary indexes the transactions need.
-- Run after load.sql (building indexes after the bulk load is faster than maintaining them).
-- All are btree indexes on plain columns, so they work on any table access method.

\set ON_ERROR_STOP 1
SET maintenance_work_mem = '512MB';

ALTER TABLE warehouse  ADD PRIMARY KEY (w_id);
ALTER TABLE district   ADD PRIMARY KEY (d_w_id, d_id);
ALTER TABLE customer   ADD PRIMARY KEY (c_w_id, c_d_id, c_id);
ALTER TABLE new_order  ADD PRIMARY KEY (no_w_id, no_d_id, no_o_id);
ALTER TABLE orders     ADD PRIMARY KEY (o_w_id, o_d_id, o_id);
ALTER TABLE order_line ADD PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number);
ALTER TABLE item       ADD PRIMARY KEY (i_id);
ALTER TABLE stock      ADD PRIMARY KEY (s_w_id, s_i_id);
ALTER TABLE supplier   ADD PRIMARY KEY (su_suppkey);
ALTER TABLE nation     ADD PRIMARY KEY (n_nationkey);
ALTER TABLE region     ADD PRIMARY KEY (r_regionkey);

-- Payment and OrderStatus by last name (clause 2.5.2.2 / 2.6.2.2): ordered by C_FIRST
CREATE INDEX customer_last_idx ON customer (c_w_id, c_d_id, c_last, c_first);
-- OrderStatus: the customer's most recent order
CREATE UNIQUE INDEX orders_customer_idx ON orders (o_w_id, o_d_id, o_c_id, o_id);
