//! Aggregation inside the scan: a group table and exact accumulators for
//! `count`, `sum` and `avg` over integers and PostgreSQL `numeric`s.
//!
//! The extension's `AnkerAgg` plan node feeds rows straight from column
//! pages into a [`Groups`] table instead of handing every row to
//! PostgreSQL's executor (DESIGN §8). Results must equal PostgreSQL's to
//! the last digit, so nothing here rounds: integer sums are `i128`, numeric
//! sums keep every base-10,000 digit ([`NumericSum`], the same idea as
//! PostgreSQL's `NumericSumAccum`), and averages are handed back as a sum
//! and a count for PostgreSQL's own `numeric_div` to divide.
//!
//! Group keys are integers (any by-value type whose equality is bitwise
//! equality, widened to `i64`) plus a NULL mask; the extension decides which
//! types qualify.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Most grouping columns a [`Key`] holds.
pub const MAX_KEYS: usize = 4;

/// The aggregates computed in the scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFn {
    /// `count(*)`
    CountRows,
    /// `count(x)`: rows where x is not NULL
    CountValues,
    /// `sum` of `int2`/`int4`: an `int8`
    SumInt,
    /// `sum` of `int8`: a `numeric`
    SumIntWide,
    /// `avg` of `int2`/`int4`/`int8`: `numeric` sum / count
    AvgInt,
    /// `sum(numeric)`
    SumNumeric,
    /// `avg(numeric)`
    AvgNumeric,
}

impl AggFn {
    /// Does the aggregate read a numeric input (rather than an integer)?
    pub fn takes_numeric(self) -> bool {
        matches!(self, AggFn::SumNumeric | AggFn::AvgNumeric)
    }

    /// The running state the aggregate keeps. Aggregates of one input
    /// with the same kind can share one accumulator, finishing it each
    /// their own way (`sum(x)` and `avg(x)`), as PostgreSQL shares
    /// transition states.
    pub fn acc_kind(self) -> AccKind {
        match self {
            AggFn::CountRows | AggFn::CountValues => AccKind::Count,
            AggFn::SumInt | AggFn::SumIntWide | AggFn::AvgInt => AccKind::Int,
            AggFn::SumNumeric | AggFn::AvgNumeric => AccKind::Numeric,
        }
    }
}

/// What an [`Acc`] holds: see [`AggFn::acc_kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccKind {
    Count,
    Int,
    Numeric,
}

/// A finished aggregate value, for the extension to turn into a datum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Null,
    Int(i64),
    /// A numeric literal (`-12.50`, `NaN`, `Infinity`, `-Infinity`).
    Numeric(String),
    /// An average: numeric literal sum divided by a count, by PostgreSQL.
    Quotient(String, i64),
}

/// A decoded PostgreSQL numeric (its on-disk payload, after the varlena header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numeric<'a> {
    NaN,
    PosInf,
    NegInf,
    /// value = ±Σ digit[i] · 10000^(weight − i); `digits` are native-endian i16s.
    Finite { negative: bool, weight: i32, dscale: u16, digits: &'a [u8] },
}

const NBASE: i64 = 10_000;

/// Decode a numeric's payload (the bytes after the varlena header), or
/// None if the bytes are not a numeric.
#[inline]
pub fn parse_numeric(payload: &[u8]) -> Option<Numeric<'_>> {
    let head = u16::from_ne_bytes([*payload.first()?, *payload.get(1)?]);
    match head & 0xC000 {
        0xC000 => match head & 0xF000 {
            0xC000 => Some(Numeric::NaN),
            0xD000 => Some(Numeric::PosInf),
            0xF000 => Some(Numeric::NegInf),
            _ => None,
        },
        0x8000 => {
            // short format: sign, 6-bit display scale, 7-bit signed weight
            let weight = if head & 0x0040 != 0 { (head & 0x3F) as i32 - 64 } else { (head & 0x3F) as i32 };
            let digits = &payload[2..];
            digits.len().is_multiple_of(2).then_some(Numeric::Finite {
                negative: head & 0x2000 != 0,
                weight,
                dscale: (head & 0x1F80) >> 7,
                digits,
            })
        }
        sign => {
            let weight = i16::from_ne_bytes([*payload.get(2)?, *payload.get(3)?]) as i32;
            let digits = &payload[4..];
            digits.len().is_multiple_of(2).then_some(Numeric::Finite {
                negative: sign == 0x4000,
                weight,
                dscale: head & 0x3FFF,
                digits,
            })
        }
    }
}

/// An exact running sum of numerics: unnormalised base-10,000 digit sums,
/// one `i64` per digit position, so adding a value is a few integer
/// additions and nothing is ever rounded.
#[derive(Clone, Debug, Default)]
pub struct NumericSum {
    /// `limbs[i]` sums the digits at position `lo + i` (weight of 10000^(lo+i)).
    limbs: Vec<i64>,
    lo: i32,
    /// Additions since the last carry propagation (each adds < 10,000 to a limb).
    pending: u64,
    dscale: u16,
    nan: bool,
    pos_inf: bool,
    neg_inf: bool,
    /// Values added as scaled integers ([`add_scaled`](Self::add_scaled)): their sum, at
    /// display scale `scaled_dscale`, not yet in `limbs`.
    scaled: i128,
    scaled_dscale: Option<u16>,
}

/// A scaled sum is moved into the limbs before it could overflow.
const SCALED_LIMIT: u128 = 1 << 120;

/// Carry propagation long before an `i64` limb could overflow.
const NORMALISE_EVERY: u64 = 1 << 40;

impl NumericSum {
    #[inline]
    pub fn add(&mut self, n: Numeric) {
        match n {
            Numeric::NaN => self.nan = true,
            Numeric::PosInf => self.pos_inf = true,
            Numeric::NegInf => self.neg_inf = true,
            Numeric::Finite { negative, weight, dscale, digits } => {
                self.dscale = self.dscale.max(dscale);
                let ndigits = (digits.len() / 2) as i32;
                if ndigits == 0 {
                    return;
                }
                let (lo, hi) = (weight - ndigits + 1, weight);
                if self.limbs.is_empty() || lo < self.lo || hi >= self.lo + self.limbs.len() as i32 {
                    self.cover(lo, hi);
                }
                let base = (weight - self.lo) as usize;
                for (i, d) in digits.chunks_exact(2).enumerate() {
                    let d = i16::from_ne_bytes([d[0], d[1]]) as i64;
                    self.limbs[base - i] += if negative { -d } else { d };
                }
                self.pending += 1;
                if self.pending >= NORMALISE_EVERY {
                    self.normalise();
                }
            }
        }
    }

    /// Add `units` · 10^-dscale: a numeric column slot's scaled value
    /// (`decimal::numeric_slot`), without taking digits apart.
    #[inline]
    pub fn add_scaled(&mut self, units: i128, dscale: u16) {
        if self.scaled_dscale != Some(dscale) || self.scaled.unsigned_abs() > SCALED_LIMIT {
            self.flush_scaled();
            self.scaled_dscale = Some(dscale);
            self.dscale = self.dscale.max(dscale);
        }
        self.scaled += units;
    }

    /// Move the scaled sum into the limbs.
    #[cold]
    fn flush_scaled(&mut self) {
        let Some(ds) = self.scaled_dscale.take() else { return };
        let v = std::mem::take(&mut self.scaled);
        if v == 0 {
            return;
        }
        // The lowest limb holds the last `4 - pad` decimals, padded with `pad` zeros to a
        // whole base-10,000 digit; the limbs above it take four decimals each.
        let ds = ds as i32;
        let pad = (4 - ds % 4) % 4;
        let lo = -(ds + pad) / 4;
        let low_div = 10u128.pow((4 - pad) as u32);
        let mut m = v.unsigned_abs();
        let mut digits = vec![((m % low_div) * 10u128.pow(pad as u32)) as i64];
        m /= low_div;
        while m > 0 {
            digits.push((m % NBASE as u128) as i64);
            m /= NBASE as u128;
        }
        let hi = lo + digits.len() as i32 - 1;
        self.cover(lo, hi);
        let base = (lo - self.lo) as usize;
        for (i, d) in digits.into_iter().enumerate() {
            self.limbs[base + i] += if v < 0 { -d } else { d };
        }
        self.pending += 1;
        if self.pending >= NORMALISE_EVERY {
            self.normalise();
        }
    }

    /// Add another running sum into this one.
    pub fn merge(&mut self, other: &NumericSum) {
        if let Some(ds) = other.scaled_dscale {
            self.add_scaled(other.scaled, ds);
        }
        self.dscale = self.dscale.max(other.dscale);
        self.nan |= other.nan;
        self.pos_inf |= other.pos_inf;
        self.neg_inf |= other.neg_inf;
        if other.limbs.is_empty() {
            return;
        }
        let other_top = other.lo + other.limbs.len() as i32 - 1;
        self.cover(other.lo, other_top);
        let base = (other.lo - self.lo) as usize;
        for (i, l) in other.limbs.iter().enumerate() {
            self.limbs[base + i] += l;
        }
        // (each side's limbs stay far below overflow; carries settle here)
        self.normalise();
    }

    /// Make positions `lo..=hi` addressable.
    #[cold]
    fn cover(&mut self, lo: i32, hi: i32) {
        if self.limbs.is_empty() {
            self.lo = lo;
            self.limbs.resize((hi - lo + 1) as usize, 0);
            return;
        }
        if lo < self.lo {
            let more = (self.lo - lo) as usize;
            self.limbs.splice(0..0, std::iter::repeat_n(0, more));
            self.lo = lo;
        }
        let top = self.lo + self.limbs.len() as i32 - 1;
        if hi > top {
            self.limbs.resize(self.limbs.len() + (hi - top) as usize, 0);
        }
    }

    /// Propagate carries: every limb but the top one in 0..10000.
    fn normalise(&mut self) {
        let mut carry = 0i64;
        let n = self.limbs.len();
        for i in 0..n {
            let v = self.limbs[i] + carry;
            if i + 1 == n {
                self.limbs[i] = v;
            } else {
                self.limbs[i] = v.rem_euclid(NBASE);
                carry = v.div_euclid(NBASE);
            }
        }
        // Split a top limb of 10,000 or more (sign kept) into more limbs.
        while self.limbs.last().is_some_and(|t| t.abs() >= NBASE) {
            let t = self.limbs.pop().expect("non-empty");
            self.limbs.push(t % NBASE);
            self.limbs.push(t / NBASE);
        }
        self.pending = 0;
    }

    /// The result when NaN or infinities went in, by PostgreSQL's rules:
    /// NaN wins, and +Infinity with -Infinity makes NaN.
    fn special(&self) -> Option<&'static str> {
        if self.nan || (self.pos_inf && self.neg_inf) {
            Some("NaN")
        } else if self.pos_inf {
            Some("Infinity")
        } else if self.neg_inf {
            Some("-Infinity")
        } else {
            None
        }
    }

    /// The sum as a numeric literal with the largest display scale of the
    /// values added (what PostgreSQL's `sum(numeric)` returns).
    pub fn literal(&self) -> String {
        if let Some(s) = self.special() {
            return s.to_string();
        }
        let mut sum = self.clone();
        sum.flush_scaled();
        sum.normalise();
        let negative = sum.is_negative();
        if negative {
            for l in &mut sum.limbs {
                *l = -*l;
            }
            sum.normalise();
        }
        // Digits from the top position down to the last fraction position.
        let top = sum.lo + sum.limbs.len() as i32 - 1;
        let digit_at = |pos: i32| -> i64 {
            if pos < sum.lo || pos > top {
                0
            } else {
                sum.limbs[(pos - sum.lo) as usize]
            }
        };
        let mut out = String::new();
        if negative {
            out.push('-');
        }
        let mut int_part = String::new();
        for pos in (0..=top.max(0)).rev() {
            let d = digit_at(pos);
            if int_part.is_empty() {
                if d != 0 {
                    int_part.push_str(&d.to_string());
                }
            } else {
                int_part.push_str(&format!("{d:04}"));
            }
        }
        if int_part.is_empty() {
            int_part.push('0');
        }
        out.push_str(&int_part);
        if self.dscale > 0 {
            let mut frac = String::new();
            let mut pos = -1;
            while frac.len() < self.dscale as usize {
                frac.push_str(&format!("{:04}", digit_at(pos)));
                pos -= 1;
            }
            frac.truncate(self.dscale as usize);
            out.push('.');
            out.push_str(&frac);
        }
        if negative && out[1..].bytes().all(|b| b == b'0' || b == b'.') {
            out.remove(0); // no "-0"
        }
        out
    }

    /// After `normalise`: lower limbs are in 0..10000, so the sign is the
    /// top non-zero limb's.
    fn is_negative(&self) -> bool {
        self.limbs.iter().rev().find(|&&l| l != 0).is_some_and(|&l| l < 0)
    }
}

/// One aggregate's running state.
#[derive(Clone, Debug)]
pub enum Acc {
    Count(i64),
    Int { sum: i128, n: i64 },
    Numeric { sum: Box<NumericSum>, n: i64 },
}

impl Acc {
    pub fn new(kind: AccKind) -> Acc {
        match kind {
            AccKind::Count => Acc::Count(0),
            AccKind::Int => Acc::Int { sum: 0, n: 0 },
            AccKind::Numeric => Acc::Numeric { sum: Box::default(), n: 0 },
        }
    }

    /// Count a row (count(*)) or a non-NULL value (count(x)).
    #[inline]
    pub fn add_count(&mut self) {
        if let Acc::Count(c) = self {
            *c += 1;
        }
    }

    #[inline]
    pub fn add_int(&mut self, v: i64) {
        if let Acc::Int { sum, n } = self {
            *sum += v as i128;
            *n += 1;
        }
    }

    #[inline]
    pub fn add_numeric(&mut self, v: Numeric) {
        if let Acc::Numeric { sum, n } = self {
            sum.add(v);
            *n += 1;
        }
    }

    /// Add a numeric given as `units` · 10^-dscale.
    #[inline]
    pub fn add_scaled(&mut self, units: i64, dscale: u16) {
        if let Acc::Numeric { sum, n } = self {
            sum.add_scaled(units as i128, dscale);
            *n += 1;
        }
    }

    /// Fold another accumulator of the same aggregate into this one, as if
    /// its values had been added here.
    pub fn merge(&mut self, other: &Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Int { sum, n }, Acc::Int { sum: s2, n: n2 }) => {
                *sum += s2;
                *n += n2;
            }
            (Acc::Numeric { sum, n }, Acc::Numeric { sum: s2, n: n2 }) => {
                sum.merge(s2);
                *n += n2;
            }
            _ => panic!("merging accumulators of different aggregates"),
        }
    }

    /// The aggregate's result, as PostgreSQL defines it (NULL over no values).
    pub fn output(&self, f: AggFn) -> Output {
        match (f, self) {
            (_, Acc::Count(c)) => Output::Int(*c),
            (_, Acc::Int { n: 0, .. }) | (_, Acc::Numeric { n: 0, .. }) => Output::Null,
            // PostgreSQL adds int2/int4 values into an int8 without an
            // overflow check (and compiles with -fwrapv): wrap the same way.
            (AggFn::SumInt, Acc::Int { sum, .. }) => Output::Int(*sum as i64),
            (AggFn::SumIntWide, Acc::Int { sum, .. }) => Output::Numeric(sum.to_string()),
            (_, Acc::Int { sum, n }) => Output::Quotient(sum.to_string(), *n),
            (AggFn::SumNumeric, Acc::Numeric { sum, .. }) => Output::Numeric(sum.literal()),
            (_, Acc::Numeric { sum, n }) => match sum.special() {
                Some(s) => Output::Numeric(s.to_string()),
                None => Output::Quotient(sum.literal(), *n),
            },
        }
    }
}

/// A group key: up to [`MAX_KEYS`] integer values and which of them are NULL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key {
    pub values: [i64; MAX_KEYS],
    pub nulls: u8,
}

impl std::hash::Hash for Key {
    /// One word per value (the derived hash feeds the array as 32 bytes,
    /// which [`KeyHasher`] would take one byte at a time).
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        for v in self.values {
            state.write_u64(v as u64);
        }
        state.write_u64(self.nulls as u64);
    }
}

/// Multiply-rotate hashing (as in rustc's FxHash): group keys are small
/// integers, and SipHash would cost more than the rest of a row's work.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_ne_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Keys whose first value is below this (the rest zero, none NULL) find
/// their group by direct indexing: TPC-C's grouping columns are small ids
/// (`ol_number`, `ol_d_id`, `w_id`), and a hash probe per row was a third
/// of a group-by's time (the "perfect hash" of DuckDB's small-key
/// aggregates, without needing statistics up front).
const DIRECT_KEYS: i64 = 1024;

/// The groups found so far and their accumulators.
pub struct Groups {
    /// One accumulator per kind, per group.
    kinds: Vec<AccKind>,
    index: HashMap<Key, u32, BuildHasherDefault<KeyHasher>>,
    /// `direct[v]` is 1 + the group of the key (v, 0, ..) without NULLs,
    /// or 0 before it has one (allocated on the first such key).
    direct: Vec<u32>,
    keys: Vec<Key>,
    /// `kinds.len()` accumulators per group, group after group.
    accs: Vec<Acc>,
    /// The last key looked up in `index` and its group: rows often come in runs.
    last: Option<(Key, u32)>,
}

impl Groups {
    /// A table whose groups each have accumulators of `kinds`. Without
    /// grouping columns (`grouped` false) there is exactly one group, even
    /// over no rows, as SQL requires.
    pub fn new(kinds: &[AccKind], grouped: bool) -> Groups {
        let mut g =
            Groups { kinds: kinds.to_vec(), index: HashMap::default(), direct: vec![], keys: vec![], accs: vec![], last: None };
        if !grouped {
            g.group(Key::default());
        }
        g
    }

    /// The group of `key`, created if new.
    #[inline]
    pub fn group(&mut self, key: Key) -> usize {
        if let Some(slot) = Self::direct_slot(&key) {
            if let Some(&g) = self.direct.get(slot) {
                if g != 0 {
                    return g as usize - 1;
                }
            }
            let g = self.new_group(key);
            if self.direct.is_empty() {
                self.direct.resize(DIRECT_KEYS as usize, 0);
            }
            self.direct[slot] = g + 1;
            return g as usize;
        }
        if let Some((k, g)) = self.last {
            if k == key {
                return g as usize;
            }
        }
        let next = self.keys.len() as u32;
        let g = *self.index.entry(key).or_insert(next);
        if g == next {
            self.new_group(key);
        }
        self.last = Some((key, g));
        g as usize
    }

    /// Where `key` lives in `direct`, if it is a direct key.
    #[inline]
    fn direct_slot(key: &Key) -> Option<usize> {
        let v = key.values[0];
        ((0..DIRECT_KEYS).contains(&v) && key.nulls == 0 && key.values[1..].iter().all(|&x| x == 0)).then_some(v as usize)
    }

    fn new_group(&mut self, key: Key) -> u32 {
        self.keys.push(key);
        self.accs.extend(self.kinds.iter().map(|&k| Acc::new(k)));
        self.keys.len() as u32 - 1
    }

    /// The group of `key`, if there is one.
    pub fn find(&self, key: &Key) -> Option<usize> {
        match Self::direct_slot(key) {
            Some(slot) => self.direct.get(slot).filter(|&&g| g != 0).map(|&g| g as usize - 1),
            None => self.index.get(key).map(|&g| g as usize),
        }
    }

    /// The accumulators of group `g`.
    pub fn accs(&self, g: usize) -> &[Acc] {
        let n = self.kinds.len();
        &self.accs[g * n..(g + 1) * n]
    }

    /// The accumulators of group `g`, one per kind given to [`Groups::new`].
    #[inline]
    pub fn accs_mut(&mut self, g: usize) -> &mut [Acc] {
        let n = self.kinds.len();
        &mut self.accs[g * n..(g + 1) * n]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn key(&self, g: usize) -> &Key {
        &self.keys[g]
    }

    /// Aggregate `f` of group `g`, finished from its accumulator `a`.
    pub fn output(&self, g: usize, a: usize, f: AggFn) -> Output {
        debug_assert_eq!(self.kinds[a], f.acc_kind());
        self.accs[g * self.kinds.len() + a].output(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// PostgreSQL's on-disk encoding of `units / 10^scale` (long format
    /// when `long`, else short), written from the format's definition.
    fn encode(units: i128, scale: u16, long: bool) -> Vec<u8> {
        let negative = units < 0;
        let mut mag = units.unsigned_abs();
        // Align the fraction to whole base-10,000 digits.
        let frac_digits = scale.div_ceil(4) as u32;
        mag *= 10u128.pow(frac_digits * 4 - scale as u32);
        let mut digits = vec![];
        while mag > 0 {
            digits.push((mag % 10_000) as i16);
            mag /= 10_000;
        }
        while digits.len() < frac_digits as usize {
            digits.push(0);
        }
        digits.reverse(); // most significant first
        let mut weight = digits.len() as i32 - frac_digits as i32 - 1;
        // Strip leading and trailing zero digits, as PostgreSQL does.
        while digits.first() == Some(&0) {
            digits.remove(0);
            weight -= 1;
        }
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            weight = 0;
        }
        let mut out = vec![];
        if long {
            let head = if negative { 0x4000u16 } else { 0 } | scale;
            out.extend_from_slice(&head.to_ne_bytes());
            out.extend_from_slice(&(weight as i16).to_ne_bytes());
        } else {
            assert!((-64..64).contains(&weight) && scale < 64);
            let w = if weight < 0 { (weight + 64) as u16 | 0x40 } else { weight as u16 };
            let head = 0x8000 | if negative { 0x2000 } else { 0 } | (scale << 7) | w;
            out.extend_from_slice(&head.to_ne_bytes());
        }
        for d in digits {
            out.extend_from_slice(&d.to_ne_bytes());
        }
        out
    }

    /// `units / 10^scale` as PostgreSQL prints it.
    fn literal(units: i128, scale: u16) -> String {
        crate::decimal::literal(units, scale as u32)
    }

    fn sum_of(values: &[(i128, u16, bool)]) -> String {
        let mut s = NumericSum::default();
        let bytes: Vec<Vec<u8>> = values.iter().map(|&(u, sc, long)| encode(u, sc, long)).collect();
        for b in &bytes {
            s.add(parse_numeric(b).expect("valid numeric"));
        }
        s.literal()
    }

    proptest! {
        /// Values added as slot integers (`add_scaled`), mixed with parsed ones and across
        /// display scales, sum to what parsing them all gives; so do merged sums.
        #[test]
        fn scaled_values_sum_like_parsed_ones(
            values in proptest::collection::vec((-10_000_000_000_000i64..10_000_000_000_000, 0u16..12, any::<bool>()), 0..40),
            split in 0usize..40,
        ) {
            let mut parsed = NumericSum::default();
            let mut fast = NumericSum::default();
            let mut other = NumericSum::default();
            for (k, &(u, sc, as_slot)) in values.iter().enumerate() {
                let b = encode(u as i128, sc, false);
                parsed.add(parse_numeric(&b).expect("valid numeric"));
                let into = if k < split { &mut fast } else { &mut other };
                if as_slot {
                    into.add_scaled(u as i128, sc);
                } else {
                    into.add(parse_numeric(&b).expect("valid numeric"));
                }
            }
            fast.merge(&other);
            prop_assert_eq!(fast.literal(), parsed.literal());
        }
    }

    #[test]
    fn scaled_sums_past_the_flush_limit_stay_exact() {
        let mut s = NumericSum::default();
        let step: i128 = 1 << 119;
        for _ in 0..5 {
            s.add_scaled(step, 2);
            s.add_scaled(-7, 2);
        }
        assert_eq!(s.literal(), literal(5 * step - 35, 2));
    }

    #[test]
    fn decodes_both_formats() {
        for long in [false, true] {
            let b = encode(-12345, 2, long);
            assert_eq!(
                parse_numeric(&b),
                Some(Numeric::Finite { negative: true, weight: 0, dscale: 2, digits: &b[if long { 4 } else { 2 }..] })
            );
        }
        assert_eq!(parse_numeric(&0xC000u16.to_ne_bytes()), Some(Numeric::NaN));
        assert_eq!(parse_numeric(&0xD000u16.to_ne_bytes()), Some(Numeric::PosInf));
        assert_eq!(parse_numeric(&0xF000u16.to_ne_bytes()), Some(Numeric::NegInf));
        assert_eq!(parse_numeric(&[0x00]), None);
    }

    #[test]
    fn sums_exactly() {
        assert_eq!(sum_of(&[(12345, 2, false), (5, 2, false)]), "123.50");
        assert_eq!(sum_of(&[(1, 4, false), (-1, 4, true)]), "0.0000");
        assert_eq!(sum_of(&[(-99_999, 3, false), (1, 0, false)]), "-98.999");
        assert_eq!(sum_of(&[(9999, 0, false), (1, 0, false)]), "10000");
        assert_eq!(sum_of(&[(-5, 1, false), (2, 1, false)]), "-0.3");
        assert_eq!(sum_of(&[(0, 2, false)]), "0.00");
        assert_eq!(sum_of(&[(1, 9, true), (1, 0, false)]), "1.000000001");
    }

    #[test]
    fn specials_win_as_in_postgresql() {
        let one = encode(1, 0, false);
        let mut s = NumericSum::default();
        s.add(parse_numeric(&one).unwrap());
        s.add(Numeric::PosInf);
        assert_eq!(s.literal(), "Infinity");
        s.add(Numeric::NegInf);
        assert_eq!(s.literal(), "NaN");
        let mut acc = Acc::new(AccKind::Numeric);
        acc.add_numeric(Numeric::NegInf);
        assert_eq!(acc.output(AggFn::AvgNumeric), Output::Numeric("-Infinity".into()));
    }

    #[test]
    fn outputs() {
        let mut a = Acc::new(AccKind::Int);
        assert_eq!(a.output(AggFn::SumInt), Output::Null);
        a.add_int(i64::MAX);
        a.add_int(1);
        assert_eq!(a.output(AggFn::SumInt), Output::Int(i64::MIN));
        assert_eq!(a.output(AggFn::SumIntWide), Output::Numeric("9223372036854775808".into()));
        assert_eq!(a.output(AggFn::AvgInt), Output::Quotient("9223372036854775808".into(), 2));
        let c = Acc::new(AccKind::Count);
        assert_eq!(c.output(AggFn::CountRows), Output::Int(0));
    }

    #[test]
    fn groups_by_key_and_nulls() {
        let mut g = Groups::new(&[AccKind::Count], true);
        assert!(g.is_empty());
        let k = |v: i64, nulls: u8| Key { values: [v, 0, 0, 0], nulls };
        for (v, n) in [(1, 0), (2, 0), (1, 0), (0, 1), (0, 0), (0, 1)] {
            let i = g.group(k(v, n));
            g.accs_mut(i)[0].add_count();
        }
        let counts: Vec<_> = (0..g.len()).map(|i| (g.key(i).values[0], g.key(i).nulls, g.output(i, 0, AggFn::CountRows))).collect();
        assert_eq!(
            counts,
            vec![(1, 0, Output::Int(2)), (2, 0, Output::Int(1)), (0, 1, Output::Int(2)), (0, 0, Output::Int(1))]
        );
        let ungrouped = Groups::new(&[AccKind::Count, AccKind::Int], false);
        assert_eq!(ungrouped.len(), 1);
        assert_eq!(ungrouped.output(0, 1, AggFn::AvgInt), Output::Null);
    }

    #[test]
    fn merging_equals_adding_everything_to_one() {
        let values = [(12345i128, 2u16, false), (-99_999, 3, true), (5, 0, false), (1, 9, true), (-7, 1, false)];
        let bytes: Vec<Vec<u8>> = values.iter().map(|&(u, sc, long)| encode(u, sc, long)).collect();
        for split in 0..=bytes.len() {
            let (mut left, mut right, mut all) = (Acc::new(AccKind::Numeric), Acc::new(AccKind::Numeric), Acc::new(AccKind::Numeric));
            for (i, b) in bytes.iter().enumerate() {
                let n = parse_numeric(b).unwrap();
                all.add_numeric(n);
                if i < split { left.add_numeric(n) } else { right.add_numeric(n) }
            }
            left.merge(&right);
            assert_eq!(left.output(AggFn::AvgNumeric), all.output(AggFn::AvgNumeric));
            assert_eq!(left.output(AggFn::SumNumeric), all.output(AggFn::SumNumeric));
        }
        let mut c = Acc::new(AccKind::Count);
        c.add_count();
        let mut d = Acc::new(AccKind::Count);
        d.add_count();
        d.add_count();
        c.merge(&d);
        assert_eq!(c.output(AggFn::CountRows), Output::Int(3));
        let mut inf = Acc::new(AccKind::Numeric);
        inf.add_numeric(Numeric::PosInf);
        let mut ninf = Acc::new(AccKind::Numeric);
        ninf.add_numeric(Numeric::NegInf);
        inf.merge(&ninf);
        assert_eq!(inf.output(AggFn::SumNumeric), Output::Numeric("NaN".into()));
    }

    #[test]
    fn shared_accumulator_finishes_each_aggregate_its_own_way() {
        let mut g = Groups::new(&[AccKind::Int], false);
        for v in [3, 4, 6] {
            g.accs_mut(0)[0].add_int(v);
        }
        assert_eq!(g.output(0, 0, AggFn::SumInt), Output::Int(13));
        assert_eq!(g.output(0, 0, AggFn::AvgInt), Output::Quotient("13".into(), 3));
    }

    proptest! {
        /// Groups numbers keys by first appearance and finds each again,
        /// whether a key is indexed directly (small, single, not NULL) or
        /// hashed (negative, large, several values, NULLs).
        #[test]
        fn groups_number_keys_by_first_appearance(
            keys in proptest::collection::vec(
                (prop_oneof![0i64..8, 1020i64..1030, -3i64..0, Just(i64::MIN), Just(i64::MAX)], 0i64..2, 0u8..3),
                0..200,
            )
        ) {
            let mut g = Groups::new(&[AccKind::Count], true);
            let mut seen: Vec<Key> = vec![];
            for &(a, b, nulls) in &keys {
                let key = Key { values: [a, b, 0, 0], nulls: nulls & 1 };
                let expected = seen.iter().position(|k| *k == key).unwrap_or_else(|| { seen.push(key); seen.len() - 1 });
                prop_assert_eq!(g.group(key), expected);
                g.accs_mut(expected)[0].add_count();
            }
            prop_assert_eq!(g.len(), seen.len());
            for (i, k) in seen.iter().enumerate() {
                prop_assert_eq!(g.find(k), Some(i));
                prop_assert_eq!(g.key(i), k);
                let n = keys.iter().filter(|&&(a, b, nulls)| Key { values: [a, b, 0, 0], nulls: nulls & 1 } == *k).count();
                prop_assert_eq!(g.output(i, 0, AggFn::CountRows), Output::Int(n as i64));
            }
            prop_assert_eq!(g.find(&Key { values: [5, 7, 1, 0], nulls: 0 }), None);
        }

        /// Sums of random numerics of mixed scales and formats equal i128 arithmetic.
        #[test]
        fn numeric_sum_matches_integer_arithmetic(
            values in proptest::collection::vec((-10i128.pow(20)..10i128.pow(20), 0u16..12, any::<bool>()), 0..60)
        ) {
            let scale = values.iter().map(|v| v.1).max().unwrap_or(0);
            let total: i128 = values.iter().map(|&(u, s, _)| u * 10i128.pow((scale - s) as u32)).sum();
            let mut s = NumericSum::default();
            let bytes: Vec<Vec<u8>> = values.iter().map(|&(u, sc, long)| encode(u, sc, long)).collect();
            for (i, b) in bytes.iter().enumerate() {
                s.add(parse_numeric(b).unwrap());
                if i % 7 == 3 {
                    s.normalise(); // carries at any point change nothing
                }
            }
            let expected = if values.is_empty() { "0".to_string() } else { literal(total, scale) };
            prop_assert_eq!(s.literal(), expected);
        }
    }
}
