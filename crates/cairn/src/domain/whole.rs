//! Whole numbers the way JSON Schema counts them.
//!
//! In JSON Schema (and so in the OpenAPI document) `"type": "integer"` accepts any number with a
//! zero fractional part: `7`, `7.0` and `7e0` are all the integer seven. serde's integer types
//! refuse `7.0`, which would make the server reject requests its own schema calls valid. Fields
//! that clients send as counts deserialize through [`unsigned`], which takes an integer or a
//! float without a fraction and refuses anything else (`7.5`, `-1`, a string).

use std::fmt;

use serde::Deserializer;
use serde::de::{Error, Unexpected, Visitor};

/// A non-negative whole number written as a JSON integer or as a float with no fraction.
pub fn unsigned<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let value = deserializer.deserialize_u64(WholeVisitor)?;
    T::try_from(value).map_err(|_| {
        D::Error::invalid_value(Unexpected::Unsigned(value), &"a smaller whole number")
    })
}

/// [`unsigned`] for an optional field: absent (with `#[serde(default)]`) or `null` is `None`.
pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    struct Whole<T>(T);

    impl<'de, T: TryFrom<u64>> serde::Deserialize<'de> for Whole<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            unsigned(deserializer).map(Whole)
        }
    }

    let value: Option<Whole<T>> = serde::Deserialize::deserialize(deserializer)?;
    Ok(value.map(|Whole(value)| value))
}

struct WholeVisitor;

/// 2^64: floats at or above it do not fit a `u64`.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

impl Visitor<'_> for WholeVisitor {
    type Value = u64;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a non-negative whole number")
    }

    fn visit_u64<E: Error>(self, value: u64) -> Result<u64, E> {
        Ok(value)
    }

    fn visit_i64<E: Error>(self, value: i64) -> Result<u64, E> {
        u64::try_from(value).map_err(|_| E::invalid_value(Unexpected::Signed(value), &self))
    }

    fn visit_f64<E: Error>(self, value: f64) -> Result<u64, E> {
        if value.fract() == 0.0 && (0.0..TWO_POW_64).contains(&value) {
            // Whole and in range, so the conversion is exact.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Ok(value as u64)
        } else {
            Err(E::invalid_value(Unexpected::Float(value), &self))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Count {
        #[serde(deserialize_with = "super::unsigned")]
        n: u32,
    }

    fn parse(json: &str) -> Result<u32, serde_json::Error> {
        serde_json::from_str::<Count>(json).map(|count| count.n)
    }

    #[derive(Debug, Deserialize)]
    struct Maybe {
        #[serde(default, deserialize_with = "super::optional")]
        n: Option<u32>,
    }

    #[test]
    fn an_optional_whole_number_may_be_absent_or_null() {
        let parse = |json: &str| serde_json::from_str::<Maybe>(json).map(|m| m.n);
        assert_eq!(parse("{}").expect("absent"), None);
        assert_eq!(parse(r#"{"n": null}"#).expect("null"), None);
        assert_eq!(parse(r#"{"n": 7.0}"#).expect("float"), Some(7));
        assert!(parse(r#"{"n": -1}"#).is_err());
        assert!(parse(r#"{"n": "7"}"#).is_err());
    }

    #[test]
    fn integral_floats_are_integers_and_nothing_else_is() {
        assert_eq!(parse(r#"{"n": 7}"#).expect("int"), 7);
        assert_eq!(parse(r#"{"n": 7.0}"#).expect("float"), 7);
        assert_eq!(parse(r#"{"n": 7e0}"#).expect("exponent"), 7);
        assert_eq!(parse(r#"{"n": -0.0}"#).expect("negative zero"), 0);
        for bad in [
            r#"{"n": 7.5}"#,
            r#"{"n": -1}"#,
            r#"{"n": -1.0}"#,
            r#"{"n": "7"}"#,
            r#"{"n": null}"#,
            r#"{"n": 4294967296}"#,
            r#"{"n": 1e300}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
