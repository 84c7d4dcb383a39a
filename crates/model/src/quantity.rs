//! Kubernetes resource quantities (`10Gi`, `1.5G`, `500m`, `1e3`), parsed exactly enough to
//! compare capacities.
//!
//! A quantity is held as a signed count of nano-units in an `i128`: that covers every suffix up
//! to `Ei` with room to spare and keeps comparisons exact for everything kube-apiserver accepts in
//! practice. Digits finer than a nano-unit round up, as Kubernetes rounds `Value()` up.

use std::cmp::Ordering;
use std::fmt;

const NANO: i128 = 1_000_000_000;
/// Largest magnitude accepted (about 10^30 nano-units, well past 1Ei).
const LIMIT: i128 = 1_000_000_000_000_000_000_000_000_000_000;

/// A parsed quantity, ordered by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Quantity {
    nanos: i128,
}

/// Why a quantity string is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("quantity is empty")]
    Empty,
    /// The string does not follow the quantity grammar.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Syntax,
    /// The suffix is not one Kubernetes knows.
    #[error("unknown quantity suffix {0:?}")]
    Suffix(String),
    /// The value is too large to represent.
    #[error("quantity is too large")]
    Overflow,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// A quantity of whole units (bytes for storage).
    pub fn from_units(units: i64) -> Self {
        Quantity { nanos: units as i128 * NANO }
    }

    /// Parses a Kubernetes quantity string.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        let bytes = s.as_bytes();
        let mut i = 0;
        let negative = match bytes[0] {
            b'-' => {
                i += 1;
                true
            }
            b'+' => {
                i += 1;
                false
            }
            _ => false,
        };
        let num_start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number = &s[num_start..i];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(QuantityError::Syntax);
        }
        let suffix = &s[i..];
        // The grammar first, as Go's parser: suffix letters, then an optional signed exponent's
        // digits. Text outside it is a syntax error; a suffix inside it that names no scale is
        // an unknown suffix (`1Gx` against `1GG`).
        let letters = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
        let exponent = letters.strip_prefix(['+', '-']).unwrap_or(letters);
        if !exponent.bytes().all(|b| b.is_ascii_digit()) {
            return Err(QuantityError::Syntax);
        }
        // Scale as (multiplier, power-of-ten exponent).
        let (mult, exp10): (i128, i32) = match suffix {
            "" => (1, 0),
            "Ki" => (1 << 10, 0),
            "Mi" => (1 << 20, 0),
            "Gi" => (1 << 30, 0),
            "Ti" => (1 << 40, 0),
            "Pi" => (1 << 50, 0),
            "Ei" => (1 << 60, 0),
            "n" => (1, -9),
            "u" => (1, -6),
            "m" => (1, -3),
            "k" => (1, 3),
            "M" => (1, 6),
            "G" => (1, 9),
            "T" => (1, 12),
            "P" => (1, 15),
            "E" => (1, 18),
            other if other.starts_with(['e', 'E']) => {
                let e = &other[1..];
                let digits = e.trim_start_matches(['+', '-']);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || e.len() - digits.len() > 1 {
                    return Err(QuantityError::Suffix(other.to_string()));
                }
                let v: i32 = e.parse().map_err(|_| QuantityError::Overflow)?;
                if !(-40..=40).contains(&v) {
                    return Err(QuantityError::Overflow);
                }
                (1, v)
            }
            other => return Err(QuantityError::Suffix(other.to_string())),
        };
        let (int_part, frac_part) = match number.split_once('.') {
            Some((a, b)) => (a, b),
            None => (number, ""),
        };
        // digits as an integer mantissa with a decimal exponent.
        let mut mantissa: i128 = 0;
        let mut exp = exp10 + 9; // target unit is nanos
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add((b - b'0') as i128))
                .ok_or(QuantityError::Overflow)?;
            if mantissa > LIMIT * 1_000_000 {
                return Err(QuantityError::Overflow);
            }
        }
        exp -= frac_part.len() as i32;
        let mut value = mantissa.checked_mul(mult).ok_or(QuantityError::Overflow)?;
        if exp >= 0 {
            for _ in 0..exp {
                value = value.checked_mul(10).ok_or(QuantityError::Overflow)?;
                if value > LIMIT {
                    return Err(QuantityError::Overflow);
                }
            }
        } else {
            let mut div: i128 = 1;
            for _ in 0..(-exp) {
                div = match div.checked_mul(10) {
                    Some(d) => d,
                    None => {
                        // Smaller than a nano-unit: rounds up to one unless zero.
                        value = if value == 0 { 0 } else { 1 };
                        div = 1;
                        break;
                    }
                };
            }
            value = (value + div - 1) / div;
        }
        if value > LIMIT {
            return Err(QuantityError::Overflow);
        }
        Ok(Quantity { nanos: if negative { -value } else { value } })
    }

    /// Value rounded up to whole units, as Kubernetes' `Quantity.Value()`.
    pub fn value(&self) -> i128 {
        if self.nanos >= 0 {
            (self.nanos + NANO - 1) / NANO
        } else {
            self.nanos / NANO
        }
    }

    /// The raw value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// True when strictly greater than zero.
    pub fn is_positive(&self) -> bool {
        self.nanos > 0
    }
}

impl fmt::Display for Quantity {
    /// Formats in the largest binary suffix that divides the value exactly, else plain units.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANO != 0 {
            return write!(f, "{}n", self.nanos);
        }
        let units = self.nanos / NANO;
        if units == 0 {
            return write!(f, "0");
        }
        for (suffix, shift) in [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            let m = 1i128 << shift;
            if units % m == 0 {
                return write!(f, "{}{}", units / m, suffix);
            }
        }
        for (suffix, p) in [("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)] {
            let m = 10i128.pow(p);
            if units % m == 0 {
                return write!(f, "{}{}", units / m, suffix);
            }
        }
        write!(f, "{units}")
    }
}

impl PartialOrd<i128> for Quantity {
    fn partial_cmp(&self, other: &i128) -> Option<Ordering> {
        self.nanos.partial_cmp(&(other * NANO))
    }
}

impl PartialEq<i128> for Quantity {
    fn eq(&self, other: &i128) -> bool {
        self.nanos == other * NANO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn binary_and_decimal_suffixes_scale_correctly() {
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("10Gi").value(), 10 * (1 << 30));
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("1.5Gi").value(), 3 * (1 << 29));
        assert_eq!(q("500m").nanos(), 500_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("123").value(), 123);
        assert_eq!(q("0").value(), 0);
    }

    #[test]
    fn comparisons_follow_value_not_spelling() {
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert!(q("1G") < q("1Gi"));
        assert!(q("999Mi") < q("1Gi"));
        assert_eq!(q("1000M"), q("1G"));
    }

    #[test]
    fn values_round_up_like_kubernetes() {
        assert_eq!(q("1m").value(), 1);
        assert_eq!(q("-1m").value(), 0);
        assert_eq!(q("0.1n").nanos(), 1);
    }

    #[test]
    fn invalid_quantities_are_rejected_with_a_reason() {
        assert_eq!(Quantity::parse("1Zi"), Err(QuantityError::Syntax));
        assert_eq!(Quantity::parse("1e999"), Err(QuantityError::Overflow));
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert_eq!(Quantity::parse("Gi"), Err(QuantityError::Syntax));
        assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::Syntax));
        assert!(Quantity::parse("-1Gi").unwrap().nanos() < 0);
        assert!(Quantity::parse("99999999999999999999999999999999999999Ei").is_err());
    }

    #[test]
    fn syntax_and_suffix_errors_are_told_apart_as_go_parses() {
        // k8s.io/apimachinery v0.37.2's resource.ParseQuantity on each: F its syntax error
        // ("quantities must match the regular expression ..."), S "unable to parse quantity's
        // suffix", ok a quantity.
        let table = [
            ("1Gx", "F"),
            ("1x", "F"),
            ("1.5.5", "F"),
            ("1 Gi", "F"),
            ("1G i", "F"),
            ("10gi", "F"),
            ("1GG", "S"),
            ("1e", "S"),
            ("1K", "S"),
            ("1Gi1", "S"),
            ("1ei", "S"),
            ("1iG", "S"),
            ("1Ti2", "S"),
            ("1Pe", "S"),
            ("1E", "ok"),
            ("1Ki", "ok"),
            ("1k", "ok"),
            ("1e3", "ok"),
            ("1m", "ok"),
            ("1u", "ok"),
            ("-1", "ok"),
            ("+1", "ok"),
            (".5", "ok"),
            ("5.", "ok"),
            ("1Ei", "ok"),
        ];
        for (text, go) in table {
            let ours = match Quantity::parse(text) {
                Ok(_) => "ok",
                Err(QuantityError::Syntax) => "F",
                Err(QuantityError::Suffix(_)) => "S",
                Err(e) => panic!("{text}: {e}"),
            };
            assert_eq!(ours, go, "{text:?}");
        }
    }

    #[test]
    fn display_picks_an_exact_suffix() {
        assert_eq!(q("10Gi").to_string(), "10Gi");
        assert_eq!(q("1G").to_string(), "1G");
        assert_eq!(q("1536Mi").to_string(), "1536Mi");
        assert_eq!(q("100").to_string(), "100");
    }
}
