//! JSON numbers kept as text, and Python's `repr` for the floats nanogate creates itself.

/// A JSON number stored as its exact text, so `1e+16`, `1.10` or a 40-digit integer come back as they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number(String);

impl Number {
    /// Wraps text the parser has already checked against the JSON number grammar (or `NaN`/`Infinity`).
    pub(crate) fn from_checked_text(text: &str) -> Self {
        Number(text.to_owned())
    }

    /// The number's text exactly as read or written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as `u64` when the text is a plain non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }

    /// The value as `i64` when the text is a plain integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }

    /// The value as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match self.0.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            s => s.parse().ok(),
        }
    }

    /// Whether the text is an integer (no fraction, no exponent), as Python's `json` would load it as `int`.
    pub fn is_integer(&self) -> bool {
        let s = self.0.strip_prefix('-').unwrap_or(&self.0);
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }

    /// A float written as Python's `repr(float)` writes it (`2.0`, `1e+16`, `1e-05`, `-0.0`, `NaN`).
    pub fn from_f64(x: f64) -> Self {
        Number(python_float_repr(x))
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Self {
        Number(n.to_string())
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        Number(n.to_string())
    }
}

/// Python's `float.__repr__`: the shortest digits that round-trip, in fixed notation when the decimal exponent
/// lies in `-4 ..= 15` and in scientific notation (`d.ddde±XX`, at least two exponent digits) otherwise.
fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Python's repr, e.g. "1.2345e-5" or "-0e0".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    round_half_even(x, &mut digits, exp);
    // Position of the decimal point relative to the start of `digits` (Python's `decpt`).
    let decpt = exp + 1;
    let mut out = String::from(sign);
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else {
        let point = decpt as usize;
        if digits.len() <= point {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// Rust's shortest digits break an exact tie upwards, Python's (David Gay's dtoa) to the even digit: for
/// 1176775249024928.25, Rust prints `…928.3` and Python `…928.2`. When the exact value of `x` lies exactly halfway
/// between `digits` and the same digits with the last one lowered by one, and that last digit is odd, take the
/// lower (even) neighbour if it also reads back as `x`.
fn round_half_even(x: f64, digits: &mut String, exp: i32) {
    let last = digits.as_bytes().last().copied().unwrap_or(b'0');
    if (last - b'0').is_multiple_of(2) {
        return;
    }
    // 800 significant digits are more than a double's exact expansion ever needs (at most 767).
    let exact = format!("{:.800e}", x.abs());
    let (exact_mantissa, exact_exp) = exact.split_once('e').unwrap_or((&exact, "0"));
    if exact_exp.parse::<i32>().ok() != Some(exp) {
        return;
    }
    let exact_digits: Vec<u8> = exact_mantissa.bytes().filter(|b| *b != b'.').collect();
    let n = digits.len();
    let mut lower = digits.clone().into_bytes();
    lower[n - 1] -= 1;
    let is_tie = exact_digits.len() > n
        && exact_digits[..n] == lower[..]
        && exact_digits[n] == b'5'
        && exact_digits[n + 1..].iter().all(|&d| d == b'0');
    if !is_tie {
        return;
    }
    let lower = String::from_utf8(lower).unwrap_or_default();
    let candidate = format!("{}0.{lower}e{}", if x < 0.0 { "-" } else { "" }, exp + 1);
    if candidate.parse::<f64>().ok() == Some(x) {
        *digits = lower;
    }
}

#[cfg(test)]
mod tests {
    use super::python_float_repr as repr;

    #[test]
    fn matches_python_repr_for_known_values() {
        let cases = [
            (2.0, "2.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (0.1, "0.1"),
            (123.456, "123.456"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (f64::from_bits(0x4310b9155acb5e81), "1176775249024928.2"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, want) in cases {
            assert_eq!(repr(x), want, "repr({x:?})");
        }
    }
}
