-- The five TPC-C transactions (spec clause 2) as PL/pgSQL functions.
--
-- Each is called by one pgbench script (bench/tpcc/*.pgbench), which draws the inputs
-- (NURand, remote warehouses, by-name selection, the 1% rollback) as the spec prescribes and
-- passes them in; the functions contain no randomness. They run in the caller's transaction
-- at READ COMMITTED (PostgreSQL's default, as in the usual PostgreSQL TPC-C kits), taking the
-- row locks the spec's updates imply. Each returns a small integer so pgbench has a result.

\set ON_ERROR_STOP 1

-- NewOrder (clause 2.4). Items are processed in (supply warehouse, item) order so that two
-- NewOrders never lock the same stock rows in opposite orders (no deadlocks); OL_NUMBER follows
-- that order. An unused item id (clause 2.4.1.4, 1% of NewOrders) raises SQLSTATE 'TPCC1' after
-- the earlier lines were written; the exception block rolls all of the NewOrder's work back
-- (a subtransaction), records the rollback in tpcc_rollbacks and returns -1.
-- Returns the number of order lines, or -1 when rolled back.
CREATE OR REPLACE FUNCTION tpcc_new_order(
    p_w_id int, p_d_id int, p_c_id int, p_ol_cnt int,
    p_i_ids int[], p_supply_w_ids int[], p_quantities int[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_w_tax     numeric;
    v_d_tax     numeric;
    v_o_id      int;
    v_discount  numeric;
    v_c_last    varchar;
    v_credit    char(2);
    v_all_local int;
    v_total     numeric := 0;
    v_price     numeric;
    v_i_name    varchar;
    v_i_data    varchar;
    v_s_data    varchar;
    v_dist_info char(24);
    v_brand     char(1);
    v_amount    numeric;
    v_number    int := 0;
    line        record;
BEGIN
    -- The whole transaction is one block, so the exception handler's implicit rollback to the
    -- block's start undoes every write, D_NEXT_O_ID included.
    BEGIN
        SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w_id;

        UPDATE district SET d_next_o_id = d_next_o_id + 1
         WHERE d_w_id = p_w_id AND d_id = p_d_id
         RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;

        SELECT c_discount, c_last, c_credit INTO v_discount, v_c_last, v_credit
          FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;

        SELECT CASE WHEN bool_and(s = p_w_id) THEN 1 ELSE 0 END INTO v_all_local
          FROM unnest(p_supply_w_ids[1:p_ol_cnt]) AS s;

        INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
        VALUES (v_o_id, p_d_id, p_w_id, p_c_id, now(), NULL, p_ol_cnt, v_all_local);
        INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);

        FOR line IN
            SELECT i, s, q FROM unnest(p_i_ids[1:p_ol_cnt], p_supply_w_ids[1:p_ol_cnt],
                                       p_quantities[1:p_ol_cnt]) AS t(i, s, q)
            ORDER BY s, i
        LOOP
            v_number := v_number + 1;
            SELECT i_price, i_name, i_data INTO v_price, v_i_name, v_i_data FROM item WHERE i_id = line.i;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'tpcc: item % not found (the NewOrder rollback case)', line.i
                      USING ERRCODE = 'TPCC1';
            END IF;

            UPDATE stock
               SET s_quantity = CASE WHEN s_quantity >= line.q + 10 THEN s_quantity - line.q
                                     ELSE s_quantity - line.q + 91 END,
                   s_ytd = s_ytd + line.q,
                   s_order_cnt = s_order_cnt + 1,
                   s_remote_cnt = s_remote_cnt + CASE WHEN line.s <> p_w_id THEN 1 ELSE 0 END
             WHERE s_w_id = line.s AND s_i_id = line.i
             RETURNING CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
                                   WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06
                                   WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09
                                   ELSE s_dist_10 END,
                       s_data
              INTO v_dist_info, v_s_data;

            v_amount := line.q * v_price;
            v_total := v_total + v_amount;
            -- brand/generic is only an output of the transaction (clause 2.4.2.2)
            v_brand := CASE WHEN v_i_data LIKE '%ORIGINAL%' AND v_s_data LIKE '%ORIGINAL%'
                            THEN 'B' ELSE 'G' END;

            INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id,
                                    ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
            VALUES (v_o_id, p_d_id, p_w_id, v_number, line.i, line.s, NULL, line.q, v_amount, v_dist_info);
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'TPCC1' THEN
        INSERT INTO tpcc_rollbacks (w_id, d_id) VALUES (p_w_id, p_d_id);
        RETURN -1;
    END;
    v_total := v_total * (1 - v_discount) * (1 + v_w_tax + v_d_tax);
    RETURN p_ol_cnt;
END $$;

-- Payment (clause 2.5). p_by_name = 1 selects the customer by last name (60%): the one at
-- position ceil(n/2) of those with that name, ordered by C_FIRST. The amount comes in cents.
-- Returns the customer's C_ID.
CREATE OR REPLACE FUNCTION tpcc_payment(
    p_w_id int, p_d_id int, p_c_w_id int, p_c_d_id int, p_c_id int,
    p_by_name int, p_c_last_n int, p_amount_cents int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_amount numeric(6,2) := p_amount_cents / 100.0;
    v_w_name varchar;
    v_d_name varchar;
    v_c_id   int := p_c_id;
    v_ids    int[];
    v_credit char(2);
BEGIN
    UPDATE warehouse SET w_ytd = w_ytd + v_amount WHERE w_id = p_w_id RETURNING w_name INTO v_w_name;
    UPDATE district SET d_ytd = d_ytd + v_amount
     WHERE d_w_id = p_w_id AND d_id = p_d_id RETURNING d_name INTO v_d_name;

    IF p_by_name = 1 THEN
        SELECT array_agg(c_id ORDER BY c_first) INTO v_ids
          FROM customer
         WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = tpcc_lastname(p_c_last_n);
        v_c_id := v_ids[(cardinality(v_ids) + 1) / 2];
        IF v_c_id IS NULL THEN
            RAISE EXCEPTION 'tpcc: no customer named % in warehouse % district %',
                  tpcc_lastname(p_c_last_n), p_c_w_id, p_c_d_id;
        END IF;
    END IF;

    UPDATE customer
       SET c_balance = c_balance - v_amount,
           c_ytd_payment = c_ytd_payment + v_amount,
           c_payment_cnt = c_payment_cnt + 1,
           c_data = CASE WHEN c_credit = 'BC'
                         THEN left(format('%s %s %s %s %s %s | ', c_id, c_d_id, c_w_id, p_d_id, p_w_id,
                                          v_amount) || c_data, 500)
                         ELSE c_data END
     WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id
     RETURNING c_credit INTO v_credit;

    INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, now(), v_amount,
            left(v_w_name || '    ' || v_d_name, 24));
    RETURN v_c_id;
END $$;

-- OrderStatus (clause 2.6), read-only. Returns the number of order lines read.
CREATE OR REPLACE FUNCTION tpcc_order_status(
    p_w_id int, p_d_id int, p_c_id int, p_by_name int, p_c_last_n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_c_id    int := p_c_id;
    v_ids     int[];
    v_balance numeric;
    v_first   varchar;
    v_middle  char(2);
    v_last    varchar;
    v_o_id    int;
    v_entry   timestamp;
    v_carrier int;
    v_lines   int;
    v_sum     numeric;
BEGIN
    IF p_by_name = 1 THEN
        SELECT array_agg(c_id ORDER BY c_first) INTO v_ids
          FROM customer
         WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = tpcc_lastname(p_c_last_n);
        v_c_id := v_ids[(cardinality(v_ids) + 1) / 2];
    END IF;
    SELECT c_balance, c_first, c_middle, c_last INTO v_balance, v_first, v_middle, v_last
      FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = v_c_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tpcc: customer % not found in warehouse % district %', v_c_id, p_w_id, p_d_id;
    END IF;

    SELECT o_id, o_entry_d, o_carrier_id INTO v_o_id, v_entry, v_carrier
      FROM orders
     WHERE o_w_id = p_w_id AND o_d_id = p_d_id AND o_c_id = v_c_id
     ORDER BY o_id DESC LIMIT 1;

    -- every line's OL_I_ID, OL_SUPPLY_W_ID, OL_QUANTITY, OL_AMOUNT, OL_DELIVERY_D is read
    SELECT count(*), sum(ol_amount + ol_quantity + ol_i_id + ol_supply_w_id)
           + count(ol_delivery_d) INTO v_lines, v_sum
      FROM order_line
     WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = v_o_id;
    RETURN v_lines;
END $$;

-- Delivery (clause 2.7), the deferred part executed inline: for each of the 10 districts, the
-- oldest undelivered order is delivered. A district with no undelivered order, or whose oldest
-- one a concurrent Delivery of the same warehouse took first, is skipped (clause 2.7.4.2).
-- Returns the number of districts delivered.
CREATE OR REPLACE FUNCTION tpcc_delivery(p_w_id int, p_carrier_id int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_d_id   int;
    v_o_id   int;
    v_c_id   int;
    v_amount numeric;
    v_done   int := 0;
BEGIN
    FOR v_d_id IN 1..10 LOOP
        SELECT no_o_id INTO v_o_id FROM new_order
         WHERE no_w_id = p_w_id AND no_d_id = v_d_id ORDER BY no_o_id LIMIT 1;
        CONTINUE WHEN NOT FOUND;
        DELETE FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id AND no_o_id = v_o_id;
        CONTINUE WHEN NOT FOUND;   -- a concurrent Delivery deleted it first

        UPDATE orders SET o_carrier_id = p_carrier_id
         WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id
         RETURNING o_c_id INTO v_c_id;

        WITH l AS (
            UPDATE order_line SET ol_delivery_d = now()
             WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id
            RETURNING ol_amount)
        SELECT sum(ol_amount) INTO v_amount FROM l;

        UPDATE customer
           SET c_balance = c_balance + coalesce(v_amount, 0),
               c_delivery_cnt = c_delivery_cnt + 1
         WHERE c_w_id = p_w_id AND c_d_id = v_d_id AND c_id = v_c_id;
        v_done := v_done + 1;
    END LOOP;
    RETURN v_done;
END $$;

-- StockLevel (clause 2.8), read-only: distinct items of the district's last 20 orders whose
-- stock is below the threshold. Returns that count.
CREATE OR REPLACE FUNCTION tpcc_stock_level(p_w_id int, p_d_id int, p_threshold int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_next int;
    v_low  int;
BEGIN
    SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
    SELECT count(DISTINCT s_i_id) INTO v_low
      FROM order_line JOIN stock ON s_w_id = p_w_id AND s_i_id = ol_i_id
     WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id
       AND ol_o_id < v_next AND ol_o_id >= v_next - 20
       AND s_quantity < p_threshold;
    RETURN v_low;
END $$;
