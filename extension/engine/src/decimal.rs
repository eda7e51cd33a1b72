//! Exact conversions between PostgreSQL's `numeric` and scaled 128-bit integers (the
//! representation of DuckDB's DECIMAL, and of fixed-scale sums): what the analytics engine
//! needs to hand numeric columns over and take results back without rounding.

use crate::agg::Numeric;

/// `n · 10^scale` as an integer, or None when that is not an integer (more fractional
/// digits than `scale` that are not zero), overflows `i128`, or `n` is NaN or infinite.
#[inline]
pub fn to_scaled(n: Numeric, scale: u32) -> Option<i128> {
    let Numeric::Finite { negative, weight, digits, .. } = n else { return None };
    let mut units: i128 = 0;
    let ndigits = digits.len() / 2;
    // Digit i (base 10,000) has weight 10000^(weight - i); bring every digit to the
    // decimal position `scale` below the point.
    for i in 0..ndigits {
        let d = i16::from_ne_bytes([digits[2 * i], digits[2 * i + 1]]) as i128;
        // exponent of 10 of this digit's last decimal place, after scaling
        let exp = 4 * (weight - i as i32) + scale as i32;
        if exp >= 0 {
            units = units.checked_add(d.checked_mul(*POW10.get(exp as usize)?)?)?;
        } else if exp > -4 {
            // a digit partly below the scale: only its zero decimals may go (i64
            // arithmetic: a digit is below 10,000, and i128 division is slow)
            let (d, div) = (d as i64, POW10[(-exp) as usize] as i64);
            if d % div != 0 {
                return None;
            }
            units = units.checked_add((d / div) as i128)?;
        } else if d != 0 {
            return None; // a digit wholly below the scale
        }
    }
    Some(if negative { -units } else { units })
}

/// [`to_scaled`] of the numeric whose varlena payload is `payload` (None also when it is
/// malformed). The common case, a short-format numeric of at most four base-10,000 digits
/// (up to 16 decimal digits), is computed in 64-bit arithmetic without taking the numeric
/// apart: reading a numeric column into DuckDB does this for every value.
#[inline]
pub fn payload_to_scaled(payload: &[u8], scale: u32) -> Option<i128> {
    if let [h0, h1, digits @ ..] = payload {
        let head = u16::from_ne_bytes([*h0, *h1]);
        if head & 0xC000 == 0x8000 && digits.len() <= 8 && digits.len().is_multiple_of(2) {
            let weight = if head & 0x0040 != 0 { (head & 0x3F) as i32 - 64 } else { (head & 0x3F) as i32 };
            let n = digits.len() / 2;
            let mut acc: i64 = 0;
            for d in digits.chunks_exact(2) {
                acc = acc * 10_000 + i16::from_ne_bytes([d[0], d[1]]) as i64;
            }
            // The value is acc · 10000^(weight + 1 - n); scaled, acc · 10^exp.
            let exp = scale as i32 + 4 * (weight + 1 - n as i32);
            let units = if (0..=18).contains(&exp) {
                acc.checked_mul(POW10[exp as usize] as i64)
            } else if (-18..0).contains(&exp) {
                // Constant divisors for the usual case, a last digit partly below the scale
                // (12.34 at scale 2 is [12, 3400]): a multiplication instead of a division.
                let exact = |div: i64| (acc % div == 0).then(|| acc / div);
                match -exp {
                    1 => exact(10),
                    2 => exact(100),
                    3 => exact(1000),
                    e => exact(POW10[e as usize] as i64),
                }
            } else {
                None
            };
            if let Some(u) = units {
                return Some(if head & 0x2000 != 0 { -(u as i128) } else { u as i128 });
            }
        }
    }
    to_scaled(crate::agg::parse_numeric(payload)?, scale)
}

/// Column slots of short numerics. A numeric whose varlena (1-byte header) takes at most
/// [`SLOT_NUMERIC_MAX`] bytes, up to two base-10,000 digits (8 decimal digits: TPC-C's
/// amounts, prices and quantities), is stored in its 16-byte column slot together with its
/// value as an integer: byte 7 is [`SLOT_TAG`] | the numeric's display scale, bytes 8..16
/// the value · 10^dscale (native endian). PostgreSQL reads the varlena, which ends before
/// byte 7; DuckDB's scan takes the integer instead of parsing base-10,000 digits, which was
/// most of the time of reading a numeric column into DuckDB.
pub const SLOT_NUMERIC_MAX: usize = 7;
const SLOT_TAG: u8 = 0x80;

/// The column slot of a numeric whose varlena `v` (1-byte header) takes at most
/// [`SLOT_NUMERIC_MAX`] bytes: the varlena, tagged with its scaled value when it is finite.
pub fn numeric_slot(v: &[u8]) -> [u8; 16] {
    debug_assert!(!v.is_empty() && v.len() <= SLOT_NUMERIC_MAX && v[0] & 1 == 1);
    let mut slot = [0u8; 16];
    let n = v.len().min(SLOT_NUMERIC_MAX);
    slot[..n].copy_from_slice(&v[..n]);
    if let [_, h0, h1, ..] = *v {
        let head = u16::from_ne_bytes([h0, h1]);
        // short format only: NaN and the infinities stay untagged
        if head & 0xC000 == 0x8000 {
            let dscale = (head & 0x1F80) >> 7;
            if let Some(units) = payload_to_scaled(&v[1..n], dscale as u32).and_then(|u| i64::try_from(u).ok()) {
                slot[7] = SLOT_TAG | dscale as u8;
                slot[8..].copy_from_slice(&units.to_ne_bytes());
            }
        }
    }
    slot
}

/// The numeric varlena of a slot [`numeric_slot`] tagged, or None for any other slot.
pub fn tagged_numeric(slot: &[u8]) -> Option<&[u8]> {
    // SAFETY: 16 bytes.
    (slot.len() == 16 && unsafe { slot_scaled(slot.as_ptr()) }.is_some()).then(|| &slot[..(slot[0] >> 1) as usize])
}

/// The value · 10^dscale and the display scale of the numeric in the column slot at
/// `slot`, when [`numeric_slot`] tagged it; None sends the caller to the varlena.
///
/// # Safety
/// `slot` points at 16 readable bytes.
#[inline(always)]
pub unsafe fn slot_scaled(slot: *const u8) -> Option<(i64, u16)> {
    // SAFETY: the caller's contract. A varlena of at most 7 bytes (odd first byte below
    // 16) leaves byte 7 to the tag; longer ones and blob slots never pass.
    unsafe {
        let tag = *slot.add(7);
        (*slot & 0xF1 == 1 && tag & 0xC0 == SLOT_TAG).then(|| ((slot.add(8) as *const i64).read_unaligned(), u16::from(tag & 0x3F)))
    }
}

/// [`slot_scaled`] when the numeric's display scale is `scale` (always so in a
/// numeric(p, scale) column).
///
/// # Safety
/// As for [`slot_scaled`].
#[inline(always)]
pub unsafe fn slot_units(slot: *const u8, scale: u32) -> Option<i64> {
    // SAFETY: the caller's contract, as in slot_scaled; one compare of the tag with the
    // scale it must carry (DuckDB's scan calls this for every value).
    unsafe { (*slot & 0xF1 == 1 && u32::from(*slot.add(7)) == u32::from(SLOT_TAG) | scale).then(|| (slot.add(8) as *const i64).read_unaligned()) }
}

/// PostgreSQL's `avg` of integers and numerics, `numeric_div(sum, count)`, exactly: the sum
/// is `sum · 10^-sum_scale`, `count` > 0. The quotient is rounded half away from zero at the
/// scale numeric.c's select_div_scale picks (at least 16 significant digits, judged from the
/// base-10,000 weights and first digits of both; never below the sum's scale) and returned
/// as an integer of scale `scale`. None when that scale exceeds `scale` or the digits
/// overflow an i128.
pub fn pg_div_units(sum: i128, count: i64, sum_scale: u32, scale: u32) -> Option<i128> {
    if count <= 0 {
        return None;
    }
    // The base-10,000 weight and first digit of |u| · 10^-ds (u ≠ 0).
    let lead = |u: u128, ds: i32| -> (i32, u128) {
        let exponent = u.ilog10() as i32 - ds; // of the leading decimal digit
        let weight = exponent.div_euclid(4);
        let shift = ds + 4 * weight;
        let first = if shift >= 0 { u / POW10[shift as usize] as u128 } else { u * POW10[(-shift) as usize] as u128 };
        (weight, first)
    };
    let (w2, f2) = lead(count as u128, 0);
    let qweight = if sum == 0 {
        -w2 - 1
    } else {
        let (w1, f1) = lead(sum.unsigned_abs(), sum_scale as i32);
        w1 - w2 - (f1 <= f2) as i32
    };
    let rscale = (16 - 4 * qweight).max(sum_scale as i32).max(0) as u32;
    if rscale > scale {
        return None;
    }
    let n = sum.unsigned_abs().checked_mul(*POW10.get((rscale - sum_scale) as usize)? as u128)?;
    let (q, r) = (n / count as u128, n % count as u128);
    let q = if 2 * r >= count as u128 { q + 1 } else { q };
    let units = i128::try_from(q).ok()?.checked_mul(*POW10.get((scale - rscale) as usize)?)?;
    Some(if sum < 0 { -units } else { units })
}

/// 10^0 .. 10^38, the powers an i128 holds.
const POW10: [i128; 39] = {
    let mut p = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// The decimal literal of `units · 10^-scale`, with exactly `scale` fractional digits (what
/// PostgreSQL's `numeric_in` turns into a numeric of display scale `scale`).
pub fn literal(units: i128, scale: u32) -> String {
    let digits = units.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale { format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits) } else { digits };
    let (int, frac) = padded.split_at(padded.len() - scale);
    let sign = if units < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finite numeric from its base-10,000 digits.
    fn num(negative: bool, weight: i32, digits: &[i16]) -> (bool, i32, Vec<u8>) {
        (negative, weight, digits.iter().flat_map(|d| d.to_ne_bytes()).collect())
    }

    /// The short varlena PostgreSQL stores for a short-format numeric.
    fn short_varlena(negative: bool, weight: i32, dscale: u16, digits: &[i16]) -> Vec<u8> {
        let head = 0x8000 | if negative { 0x2000 } else { 0 } | dscale << 7 | (weight & 0x7F) as u16;
        let mut v = vec![0u8];
        v.extend_from_slice(&head.to_ne_bytes());
        v.extend(digits.iter().flat_map(|d| d.to_ne_bytes()));
        v[0] = ((v.len() as u8) << 1) | 1;
        v
    }

    #[test]
    fn short_numerics_carry_their_scaled_value_in_the_slot() {
        for (negative, weight, dscale, digits, units) in [
            (false, 0, 2, &[1234, 5600][..], 123_456i64), // 1234.56
            (true, -1, 2, &[500][..], -5),                  // -0.05
            (false, 0, 2, &[][..], 0),                      // 0.00
            (false, 1, 0, &[9999, 9999][..], 99_999_999),   // numeric(8,0)'s largest
            (false, -1, 4, &[1234][..], 1234),              // 0.1234
            (true, 2, 1, &[7][..], -7_000_000_000),         // -700000000.0
        ] {
            let v = short_varlena(negative, weight, dscale, digits);
            let slot = numeric_slot(&v);
            assert_eq!(&slot[..v.len()], &v[..]);
            assert_eq!(unsafe { slot_units(slot.as_ptr(), dscale as u32) }, Some(units), "{v:?}");
            assert_eq!(unsafe { slot_units(slot.as_ptr(), dscale as u32 + 1) }, None, "another scale reads the varlena");
            assert_eq!(tagged_numeric(&slot), Some(&v[..]));
            // the tag agrees with parsing the varlena
            assert_eq!(payload_to_scaled(&v[1..], dscale as u32), Some(units as i128));
        }
    }

    #[test]
    fn other_slots_are_not_taken_for_tagged_numerics() {
        // NaN and infinities: special short values, untagged
        for head in [0xC000u16, 0xD000, 0xF000] {
            let mut v = vec![7u8];
            v.extend_from_slice(&head.to_ne_bytes());
            let slot = numeric_slot(&v);
            assert_eq!(tagged_numeric(&slot), None);
            assert_eq!(unsafe { slot_units(slot.as_ptr(), 0) }, None);
        }
        // a text of 5 bytes: byte 7 is padding
        let mut text = [0u8; 16];
        text[..5].copy_from_slice(&[11, b'a', b'b', b'c', b'd']);
        assert_eq!(tagged_numeric(&text), None);
        assert_eq!(unsafe { slot_units(text.as_ptr(), 0) }, None);
        // a 15-byte varlena whose byte 7 happens to look like a tag
        let mut long = [0x80u8; 16];
        long[0] = (15 << 1) | 1;
        assert_eq!(tagged_numeric(&long), None);
        assert_eq!(unsafe { slot_units(long.as_ptr(), 0) }, None);
        // a blob slot (first byte 0)
        let mut blob = [0u8; 16];
        blob[7] = 0x80;
        assert_eq!(tagged_numeric(&blob), None);
        assert_eq!(unsafe { slot_units(blob.as_ptr(), 0) }, None);
    }

    #[test]
    fn tagged_values_agree_with_parsing_over_many_numerics() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..100_000 {
            let r = next();
            let ndigits = (r % 3) as usize;
            let digits: Vec<i16> = (0..ndigits).map(|i| ((r >> (8 + 14 * i)) % 10_000) as i16).collect();
            // PostgreSQL never stores leading or trailing zero digits
            if digits.first() == Some(&0) || digits.last() == Some(&0) {
                continue;
            }
            let weight = ((r >> 40) % 8) as i32 - 4;
            let dscale = ((r >> 44) % 20) as u16;
            let v = short_varlena(r >> 63 == 1, weight, dscale, &digits);
            let slot = numeric_slot(&v);
            let parsed = payload_to_scaled(&v[1..], dscale as u32).and_then(|u| i64::try_from(u).ok());
            assert_eq!(unsafe { slot_units(slot.as_ptr(), dscale as u32) }, parsed, "{v:?}");
        }
    }

    fn scaled(n: &(bool, i32, Vec<u8>), scale: u32) -> Option<i128> {
        to_scaled(Numeric::Finite { negative: n.0, weight: n.1, dscale: 0, digits: &n.2 }, scale)
    }

    #[test]
    fn scales_exactly() {
        // 1234.5678 = [1234, 5678] weight 0
        let n = num(false, 0, &[1234, 5678]);
        assert_eq!(scaled(&n, 4), Some(12_345_678));
        assert_eq!(scaled(&n, 6), Some(1_234_567_800));
        assert_eq!(scaled(&n, 2), None, "digits below the scale are not zero");
        // -0.05 = [500] weight -1, scale 2
        assert_eq!(scaled(&num(true, -1, &[500]), 2), Some(-5));
        // 120000 = [12] weight 1
        assert_eq!(scaled(&num(false, 1, &[12]), 0), Some(120_000));
        assert_eq!(scaled(&num(false, 0, &[]), 3), Some(0));
        assert_eq!(to_scaled(Numeric::NaN, 2), None);
        // 10^40 does not fit
        assert_eq!(scaled(&num(false, 10, &[1]), 0), None);
        // digits wholly below the scale: zero (trailing zero groups) or not representable
        assert_eq!(scaled(&num(false, 0, &[1, 0, 0]), 2), Some(100));
        assert_eq!(scaled(&num(false, -2, &[1]), 2), None, "0.00000001 at scale 2");
        // every position of a digit partly below the scale
        assert_eq!(scaled(&num(false, -1, &[1200]), 2), Some(12));
        assert_eq!(scaled(&num(false, -1, &[1230]), 2), None);
        assert_eq!(scaled(&num(true, -1, &[1230]), 3), Some(-123));
    }

    /// PostgreSQL's own quotients (`SELECT 0.05::numeric / 3::numeric` and so on).
    #[test]
    fn divides_as_postgresql_does() {
        let cases: &[(i128, i64, u32, &str)] = &[
            (10, 3, 0, "3.3333333333333333"),
            (1, 3, 0, "0.33333333333333333333"),
            (0, 7, 0, "0.00000000000000000000"),
            (1234567, 1, 2, "12345.6700000000000000"),
            (-5, 3, 2, "-0.01666666666666666667"),
            (2, 3, 0, "0.66666666666666666667"),
            (99999999, 7, 0, "14285714.142857142857"),
            (123456789012345678, 1000, 0, "123456789012345.6780"),
            (1, 1000000000007, 0, "0.00000000000099999999999300000000"),
            (-7, 2, 0, "-3.5000000000000000"),
            (15, 2, 1, "0.75000000000000000000"),
            (1, 7, 6, "0.000000142857142857142857"),
            (3, 9999, 0, "0.00030003000300030003"),
            (3, 10000, 0, "0.00030000000000000000"),
            (10000, 9999, 0, "1.0001000100010001"),
            (9999, 10000, 0, "0.99990000000000000000"),
            (938849766438954, 3, 4, "31294992214.63180000"),
            (17054203807625, 123457, 0, "138138816.00577529"),
            (-5065, 1, 0, "-5065.0000000000000000"),
            (774666374000777, 12, 2, "645555311667.31416667"),
            (650493432, 123457, 4, "0.52689878419206687349"),
            (581706748, 1000, 4, "58.1706748000000000"),
            (5, 123457, 2, "0.000000404999311501170448"),
            (-8186606249571, 7, 0, "-1169515178510.1429"),
            (-4554, 12, 4, "-0.03795000000000000000"),
            (584916563, 12, 2, "487430.469166666667"),
        ];
        for &(sum, count, ds, pg) in cases {
            let digits = pg.split_once('.').map_or(0, |(_, f)| f.len()) as u32;
            let expected: i128 = pg.replace('.', "").parse().unwrap();
            assert_eq!(pg_div_units(sum, count, ds, digits), Some(expected), "{sum}e-{ds} / {count}");
            // at a larger scale, the same value
            assert_eq!(pg_div_units(sum, count, ds, digits + 3), Some(expected * 1000), "{sum}e-{ds} / {count}");
            if digits > 0 {
                assert_eq!(pg_div_units(sum, count, ds, digits - 1), None, "PostgreSQL's scale exceeds the one asked for");
            }
        }
        assert_eq!(pg_div_units(1, 0, 0, 30), None);
        assert_eq!(pg_div_units(i128::MAX / 10, 3, 0, 38), None, "overflow");
    }

    /// The short-format payload of a numeric (weight within ±63, display scale below 64).
    fn short_payload(negative: bool, weight: i32, dscale: u16, digits: &[i16]) -> Vec<u8> {
        let head = 0x8000u16 | if negative { 0x2000 } else { 0 } | (dscale << 7) & 0x1F80 | (weight & 0x7F) as u16;
        head.to_ne_bytes().into_iter().chain(digits.iter().flat_map(|d| d.to_ne_bytes())).collect()
    }

    #[test]
    fn payloads_scale_as_taken_apart() {
        assert_eq!(payload_to_scaled(&short_payload(false, 0, 4, &[1234, 5678]), 4), Some(12_345_678));
        assert_eq!(payload_to_scaled(&short_payload(true, -1, 2, &[500]), 2), Some(-5));
        assert_eq!(payload_to_scaled(&short_payload(false, 0, 0, &[]), 2), Some(0));
        assert_eq!(payload_to_scaled(&short_payload(false, 0, 4, &[1234, 5678]), 2), None);
        assert_eq!(payload_to_scaled(&[0x00, 0xC0], 2), None, "NaN");
        assert_eq!(payload_to_scaled(&[0x00], 2), None, "malformed");
    }

    proptest::proptest! {
        #[test]
        fn the_short_path_agrees_with_to_scaled(
            negative: bool,
            weight in -8i32..8,
            digits in proptest::collection::vec(proptest::prop_oneof![0i16..10_000, proptest::strategy::Just(0i16)], 0..7),
            scale in 0u32..24,
        ) {
            let payload = short_payload(negative, weight, 0, &digits);
            let slow = to_scaled(crate::agg::parse_numeric(&payload).unwrap(), scale);
            proptest::prop_assert_eq!(payload_to_scaled(&payload, scale), slow);
        }
    }

    #[test]
    fn literals_keep_the_scale() {
        assert_eq!(literal(12_345_678, 4), "1234.5678");
        assert_eq!(literal(-5, 2), "-0.05");
        assert_eq!(literal(0, 3), "0.000");
        assert_eq!(literal(42, 0), "42");
        assert_eq!(literal(i128::MIN, 0), i128::MIN.to_string());
    }
}
