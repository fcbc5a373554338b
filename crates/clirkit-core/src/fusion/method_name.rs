//! Fusion methods by name, as the bindings and the CLI give them.

use super::normalize::Norm;
use super::Method;
use crate::error::{Error, Result};

crate::options::option_enum! {
    /// The name of a fusion [`Method`], without its parameters.
    pub enum MethodName("fusion method") {
        Rrf = "rrf",
        CombSum = "combsum",
        CombMnz = "combmnz",
        Interpolate = "interpolate" | "interpolation",
    }
}

impl Method {
    /// The method called `name` with its parameters: `k` for RRF, `norm` for the score-based
    /// methods, and `alpha` (required) for interpolation.
    pub fn from_name(name: &str, k: f64, norm: Norm, alpha: Option<f64>) -> Result<Method> {
        Ok(match name.parse::<MethodName>()? {
            MethodName::Rrf => Method::Rrf { k },
            MethodName::CombSum => Method::CombSum { norm },
            MethodName::CombMnz => Method::CombMnz { norm },
            MethodName::Interpolate => Method::Interpolate {
                alpha: alpha.ok_or_else(|| Error::invalid("method 'interpolate' needs alpha"))?,
                norm,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_their_parameters() {
        let norm = Norm::ZScore;
        assert_eq!(
            Method::from_name("RRF", 60.0, norm, None).unwrap(),
            Method::Rrf { k: 60.0 }
        );
        assert_eq!(
            Method::from_name("interpolation", 60.0, norm, Some(0.3)).unwrap(),
            Method::Interpolate { alpha: 0.3, norm }
        );
        let e = Method::from_name("interpolate", 60.0, norm, None).unwrap_err();
        assert!(e.to_string().contains("needs alpha"), "{e}");
        let e = Method::from_name("borda", 60.0, norm, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown fusion method 'borda'; expected rrf, combsum, combmnz or interpolate"
        );
    }
}
