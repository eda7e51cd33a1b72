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

    #[test]
    fn literals_keep_the_scale() {
        assert_eq!(literal(12_345_678, 4), "1234.5678");
        assert_eq!(literal(-5, 2), "-0.05");
        assert_eq!(literal(0, 3), "0.000");
        assert_eq!(literal(42, 0), "42");
        assert_eq!(literal(i128::MIN, 0), i128::MIN.to_string());
    }
}
