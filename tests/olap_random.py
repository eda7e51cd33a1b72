#!/usr/bin/env python3
"""Random analytical queries (seeded) for tests/olap_random.sh: joins, filters, group-by,
aggregates, sub-queries, NULLs and every type anker hands to DuckDB.

    olap_random.py SEED COUNT   prints COUNT queries, one per line, over tables r1@ and r2@
"""
import random
import sys

INTS = ["i2", "i4", "i8", "k"]
NUMS = INTS + ["n"]
ALL = NUMS + ["f", "b", "d", "ts", "t", "c"]


class Gen:
    def __init__(self, rnd):
        self.r = rnd

    def pick(self, xs):
        return self.r.choice(xs)

    def const_for(self, col):
        r = self.r
        if col in INTS:
            return str(r.randint(-5, 40))
        if col == "n":
            return f"{r.randint(-300, 300) / 4:.2f}"
        if col == "f":
            return f"{r.randint(-100, 100) / 8}"
        if col == "b":
            return self.pick(["true", "false"])
        if col == "d":
            return f"date '2021-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}'"
        if col == "ts":
            return f"timestamp '2021-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:30:00'"
        if col == "t":
            return f"'t{r.randint(0, 30)}'"
        return self.pick(["'ab'", "'b'", "'xyz'", "'a'"])

    def pred(self, alias, depth=0):
        r = self.r
        col = f"{alias}.{self.pick(ALL)}"
        kind = r.randint(0, 10 if depth == 0 else 6)
        bare = col.split(".")[1]
        if kind <= 2:
            return f"{col} {self.pick(['=', '<>', '<', '<=', '>', '>='])} {self.const_for(bare)}"
        if kind == 3:
            return f"{col} IS {self.pick(['', 'NOT '])}NULL"
        if kind == 4:
            c = self.pick(INTS)
            vals = ", ".join(str(r.randint(0, 20)) for _ in range(r.randint(1, 4)))
            return f"{alias}.{c} {self.pick(['IN', 'NOT IN'])} ({vals})"
        if kind == 5:
            return f"{alias}.t LIKE 't{r.randint(1, 3)}%'" if r.random() < 0.6 else f"{alias}.c LIKE '{self.pick(['a', 'b', 'x'])}%'"
        if kind == 6:
            lo = r.randint(0, 20)
            return f"{alias}.{self.pick(INTS)} BETWEEN {lo} AND {lo + r.randint(0, 10)}"
        if kind == 7:
            return f"({self.pred(alias, depth + 1)} {self.pick(['AND', 'OR'])} {self.pred(alias, depth + 1)})"
        if kind == 8:
            return f"{self.pick(['', 'NOT '])}EXISTS (SELECT 1 FROM r2@ s WHERE s.k = {alias}.k AND {self.pred('s', depth + 1)})"
        if kind == 9:
            return f"{alias}.k IN (SELECT s.k FROM r2@ s WHERE {self.pred('s', depth + 1)})"
        # avg below the top level, compared (rounded as PostgreSQL rounds its numeric_div)
        c = self.pick(["i2", "i4", "k", "n"])
        inner = self.pick(["", f" WHERE s.k = {alias}.k", f" WHERE {self.pred('s', depth + 1)}"])
        return f"{alias}.{self.pick(NUMS)} {self.pick(['<', '>=', '=', '<>'])} (SELECT avg(s.{c}) FROM r{self.pick('12')}@ s{inner})"

    def expr(self, alias):
        r = self.r
        c = self.pick(ALL)
        col = f"{alias}.{c}"
        kind = r.randint(0, 8)
        if kind <= 3 or c not in NUMS + ["t", "d"]:
            return col
        if c in INTS and kind == 4:
            return f"{col} {self.pick(['+', '-', '*'])} {r.randint(1, 9)}"
        if c in INTS and kind == 5:
            return f"mod({col}, {r.randint(2, 9)})"
        if c == "i8" and kind == 6:
            return f"{col} * 100000000"  # overflows bigint now and then: both must fail alike
        if c == "n" and kind <= 6:
            return self.pick([f"{col} * 1.5", f"coalesce({col}, 0.00)", f"{col} + {alias}.i4", f"{col} / 3",
                              f"{col} * -2.25", f"coalesce({col}, 7)", f"CASE WHEN {alias}.b THEN {col} ELSE 1.5 END",
                              f"CASE WHEN {alias}.b THEN {col} END"])
        if c == "t":
            return self.pick([f"substr({col}, 1, 2)", f"{col} || {alias}.c"])
        if c == "d":
            return f"extract({self.pick(['year', 'month', 'dow'])} FROM {col})"
        return f"CASE WHEN {self.pred(alias, 1)} THEN {col} ELSE NULL END"

    def agg(self, alias):
        r = self.r
        c = self.pick(ALL)
        col = f"{alias}.{c}"
        if c == "n" and r.random() < 0.3:
            # sums whose scale depends on which branches rows take
            return self.pick([f"sum(CASE WHEN {alias}.b THEN {col} ELSE 0 END)",
                              f"sum(CASE WHEN {alias}.i2 > {r.randint(0, 20)} THEN {col} WHEN {alias}.b THEN 1.5 END)",
                              f"sum(CASE WHEN {alias}.t LIKE 't1%' THEN {col} ELSE 0 END) / count(*)"])
        if c in NUMS:
            return self.pick([f"sum({col})", f"avg({col})", f"min({col})", f"max({col})", f"count({col})", f"count(DISTINCT {col})"])
        if c in ["d", "ts", "t"]:
            return self.pick([f"min({col})", f"max({col})", f"count({col})"])
        return self.pick(["count(*)", f"count({col})"])

    def query(self):
        r = self.r
        # 3 (one table) twice as often as each join shape; 4 and 5 join four relations,
        # which PostgreSQL may join as a bushy tree and DuckDB then joins in its order.
        join = r.choice([0, 1, 2, 3, 3, 4, 5, 6])
        if join == 0:
            frm = "r1@ a JOIN r2@ b ON a.k = b.k"
        elif join == 1:
            frm = "r1@ a LEFT JOIN r2@ b ON a.k = b.k"
        elif join == 2:
            frm = "r1@ a, r2@ b, r2@ c WHERE a.k = b.k AND b.i2 = c.k"
        elif join == 4:
            frm = "r1@ a, r2@ b, r2@ c, r1@ d WHERE a.k = b.k AND c.i4 = d.i4 AND b.i2 = c.k"
        elif join == 5:
            frm = ("r1@ a, (SELECT k AS gk, count(*) AS gn, max(i4) AS gm, avg(n) AS ga FROM r1@ GROUP BY k) g, r2@ b, r2@ c"
                   f" WHERE a.k = g.gk AND b.k = a.k AND c.i2 = b.k AND a.i4 < g.gm AND a.{self.pick(['n', 'i2', 'i8'])} {self.pick(['<', '>'])} g.ga")
        elif join == 6:
            frm = "r1@ a JOIN r2@ b ON a.k = b.k JOIN r2@ c ON b.i2 = c.k JOIN r1@ d ON d.i4 = c.i4 WHERE true"
        else:
            frm = "r1@ a"
        aliases = {0: ["a", "b"], 1: ["a", "b"], 2: ["a", "b", "c"], 4: ["a", "b", "c", "d"], 5: ["a", "b", "c"],
                   6: ["a", "b", "c", "d"]}.get(join, ["a"])
        preds = [self.pred(self.pick(aliases)) for _ in range(r.randint(0, 2))]
        if len(aliases) > 1 and join != 1 and r.random() < 0.3:
            # an OR of ANDs over two tables (the planner derives one-table restrictions from it)
            x, y = r.sample(aliases, 2)
            preds.append(f"(({self.pred(x, 1)} AND {self.pred(y, 1)}) OR ({self.pred(x, 1)} AND {self.pred(y, 1)}))")
        where = " AND ".join(preds)
        if join in (2, 4, 5, 6):
            frm_where = frm + (f" AND {where}" if where else "")
        else:
            frm_where = frm + (f" WHERE {where}" if where else "")
        if r.random() < 0.6:
            keys = [f"{self.pick(aliases)}.{self.pick(['k', 'i2', 'b', 'c', 'd', 't'])}" for _ in range(r.randint(0, 2))]
            keys = list(dict.fromkeys(keys))
            aggs = [self.agg(self.pick(aliases)) for _ in range(r.randint(1, 3))]
            cols = keys + aggs
            q = f"SELECT {', '.join(cols)} FROM {frm_where}"
            if keys:
                q += f" GROUP BY {', '.join(keys)}"
                if r.random() < 0.3:
                    q += f" HAVING count(*) > {r.randint(0, 5)}"
        else:
            cols = [self.expr(self.pick(aliases)) for _ in range(r.randint(1, 4))]
            q = f"SELECT {'DISTINCT ' if r.random() < 0.2 else ''}{', '.join(cols)} FROM {frm_where}"
        if r.random() < 0.4:
            q += " ORDER BY " + ", ".join(str(i + 1) for i in range(len(cols)))
            if r.random() < 0.5:
                q += f" LIMIT {r.randint(1, 30)}"
        return q


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    g = Gen(random.Random(seed))
    for _ in range(count):
        print(g.query())


if __name__ == "__main__":
    main()
