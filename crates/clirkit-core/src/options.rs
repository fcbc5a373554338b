//! Option enums named by strings (a metric, a fusion method, a normalization, ...): one macro
//! gives each its names, `FromStr` (case-insensitive, with aliases), `Display` and serde as its
//! name, so the core, the bindings, the CLI and manifests all parse and print them alike.

use crate::error::Error;

/// `unknown {what} '{text}'; expected a, b or c`.
pub(crate) fn unknown(what: &str, text: &str, names: &[&str]) -> Error {
    let expected = match names {
        [] => String::new(),
        [only] => only.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    };
    Error::invalid(format!("unknown {what} '{text}'; expected {expected}"))
}

/// Declares an enum of named options (`Copy`, comparable, hashable): `option_enum! { pub enum Metric("metric") { InnerProduct
/// = "ip", L2 = "l2" | "euclidean" } }`, the first name of each variant being the one printed.
macro_rules! option_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every option's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The option's name, as parsed and written.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::Error;

            fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
                match text.to_ascii_lowercase().as_str() {
                    $( $text $(| $alias)* => Ok($name::$variant), )+
                    _ => Err($crate::options::unknown($what, text, Self::NAMES)),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use option_enum;

#[cfg(test)]
mod tests {
    option_enum! {
        enum Shape("shape") {
            Round = "round" | "circle",
            Square = "square",
            Flat = "flat",
        }
    }

    #[test]
    fn names_aliases_errors_and_serde() {
        assert_eq!("Circle".parse::<Shape>().unwrap(), Shape::Round);
        assert_eq!(Shape::Round.to_string(), "round");
        let e = "oval".parse::<Shape>().unwrap_err().to_string();
        assert_eq!(e, "unknown shape 'oval'; expected round, square or flat");
        assert_eq!(serde_json::to_string(&Shape::Square).unwrap(), "\"square\"");
        assert_eq!(
            serde_json::from_str::<Shape>("\"flat\"").unwrap(),
            Shape::Flat
        );
        assert!(serde_json::from_str::<Shape>("\"oval\"").is_err());
    }
}
