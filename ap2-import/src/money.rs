//! Money from its decimal text, exactly.
//!
//! Guarantees: an amount is read from the digits as written, never through
//! a binary float: `0.29`, `0.57` and `1.13` major units of a two-decimal
//! currency are exactly 29, 57 and 113 minor units, and an amount with a
//! fraction of a minor unit (`0.295`) is refused, never rounded. Negative
//! amounts and amounts past `i64::MAX` minor units are refused.

use crate::error::ImportError;
use crate::json::Json;

/// How many decimal places a currency's minor unit has (ISO 4217): 0 for
/// the currencies listed there without a minor unit, 3 and 4 for those
/// with a thousandth and a ten-thousandth, 2 for every other code.
pub fn minor_unit_exponent(currency: &str) -> u32 {
    const ZERO: &[&str] = &[
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND",
        "VUV", "XAF", "XOF", "XPF",
    ];
    const THREE: &[&str] = &["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"];
    const FOUR: &[&str] = &["CLF", "UYW"];
    if ZERO.contains(&currency) {
        0
    } else if THREE.contains(&currency) {
        3
    } else if FOUR.contains(&currency) {
        4
    } else {
        2
    }
}

/// Whether `c` is a currency code as the gate writes one: three ASCII
/// capital letters.
pub fn is_currency_code(c: &str) -> bool {
    c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase())
}

/// The JSON number `text` times 10^`shift`, as an exact whole number of
/// minor units. `shift` is 0 for an amount already in minor units and the
/// currency's exponent for one in major units. `field` and `currency`
/// name the amount in a refusal.
pub(crate) fn to_minor_units(
    value: &Json,
    shift: u32,
    field: &str,
    currency: &str,
) -> Result<i64, ImportError> {
    let invalid = || ImportError::MoneyInvalid {
        field: field.to_owned(),
        text: value.shown(),
    };
    let Json::Number(text) = value else {
        return Err(invalid());
    };
    let (negative, digits, scale) = decimal(text).ok_or_else(invalid)?;
    // The amount is digits * 10^(shift - scale).
    let exponent = i64::from(shift) - scale;
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    if negative {
        return Err(invalid());
    }
    let whole = if exponent >= 0 {
        let zeros = usize::try_from(exponent).map_err(|_| invalid())?;
        if significant.len() + zeros > 19 {
            return Err(invalid());
        }
        format!("{significant}{}", "0".repeat(zeros))
    } else {
        let dropped = usize::try_from(-exponent).map_err(|_| invalid())?;
        let keep = significant.len().saturating_sub(dropped);
        if significant[keep..].bytes().any(|b| b != b'0') || dropped > significant.len() {
            return Err(ImportError::MoneyFraction {
                field: field.to_owned(),
                text: text.clone(),
                currency: currency.to_owned(),
            });
        }
        significant[..keep].to_owned()
    };
    whole.parse::<i64>().map_err(|_| invalid())
}

/// A JSON number's sign, its digits (integer and fraction run together)
/// and the power of ten they are divided by; `None` for text that is not
/// a JSON number or whose exponent is beyond any amount.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int) || (mantissa.contains('.') && !all_digits(frac)) {
        return None;
    }
    let exp: i64 = match exp {
        None => 0,
        Some(e) => {
            let unsigned = e.strip_prefix(['+', '-']).unwrap_or(e);
            if !all_digits(unsigned) || unsigned.len() > 4 {
                return None;
            }
            e.parse().ok()?
        }
    };
    if int.len() + frac.len() > 4096 {
        return None;
    }
    let frac_len = i64::try_from(frac.len()).ok()?;
    Some((negative, format!("{int}{frac}"), frac_len - exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minor(text: &str, shift: u32) -> Result<i64, ImportError> {
        to_minor_units(&Json::Number(text.into()), shift, "max", "INR")
    }

    #[test]
    fn the_reference_sdks_float_cases_are_exact() {
        // int(0.29 * 100) is 28 in the reference SDK; here 29.
        assert_eq!(minor("0.29", 2), Ok(29));
        assert_eq!(minor("0.57", 2), Ok(57));
        assert_eq!(minor("1.13", 2), Ok(113));
        assert_eq!(minor("15.0", 2), Ok(1500));
        assert_eq!(minor("15", 2), Ok(1500));
        assert_eq!(minor("1.13e0", 2), Ok(113));
        assert_eq!(minor("113E-2", 2), Ok(113));
        assert_eq!(minor("0.0113e2", 2), Ok(113));
        assert_eq!(minor("0", 2), Ok(0));
        assert_eq!(minor("-0.00", 2), Ok(0));
        assert_eq!(minor("0001.10", 2), Ok(110));
    }

    #[test]
    fn a_fraction_of_a_minor_unit_is_refused() {
        for text in ["0.295", "0.2900000000000000001", "100.505", "1e-3", "12.5"] {
            let shift = if text == "12.5" { 0 } else { 2 };
            assert!(
                matches!(minor(text, shift), Err(ImportError::MoneyFraction { .. })),
                "{text}"
            );
        }
        // Trailing zeros past the minor unit are no fraction.
        assert_eq!(minor("0.2900", 2), Ok(29));
        assert_eq!(minor("20000.0", 0), Ok(20000));
    }

    #[test]
    fn negative_huge_and_non_numbers_are_refused() {
        for text in [
            "-1",
            "-0.01",
            "92233720368547758.08",
            "1e20",
            "1e99999",
            "NaN",
            "1.",
        ] {
            assert!(
                matches!(minor(text, 2), Err(ImportError::MoneyInvalid { .. })),
                "{text}"
            );
        }
        assert_eq!(minor("92233720368547758.07", 2), Ok(i64::MAX));
        assert!(matches!(
            to_minor_units(&Json::String("1.00".into()), 2, "max", "INR"),
            Err(ImportError::MoneyInvalid { .. })
        ));
    }

    #[test]
    fn exponents_follow_iso_4217() {
        assert_eq!(minor_unit_exponent("INR"), 2);
        assert_eq!(minor_unit_exponent("USD"), 2);
        assert_eq!(minor_unit_exponent("JPY"), 0);
        assert_eq!(minor_unit_exponent("KWD"), 3);
        assert_eq!(minor_unit_exponent("CLF"), 4);
    }
}
