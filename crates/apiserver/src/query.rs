//! Query parameters as kube-apiserver reads them: the first value of each name, and booleans
//! by `Convert_Slice_string_To_bool`.
//!
//! A leaf below everything that reads a request's query (options, limits, the in-flight filter,
//! dispatch and the verbs); it uses nothing of this crate but [`crate::error`].

use crate::error::{ApiError, Result};
use std::collections::HashMap;

/// Query parameters: the first value of each name, as kube-apiserver converts `url.Values` into
/// its options (`Convert_Slice_string_To_string` takes the first).
pub type Query = HashMap<String, String>;

/// The query of `uri` (the first value of a repeated name wins).
pub fn parse_query(uri: &axum::http::Uri) -> Result<Query> {
    let pairs = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))?;
    let mut q = Query::new();
    for (k, v) in pairs.0 {
        q.entry(k).or_insert(v);
    }
    Ok(q)
}

/// A boolean parameter as kube-apiserver reads one (`Convert_Slice_string_To_bool`): absent is
/// false, and so are `0` and `false` in any case; any other value, the empty one included, is
/// true.
pub fn flag(q: &Query, name: &str) -> bool {
    q.get(name).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(query: &str) -> Query {
        parse_query(&format!("/api/v1/pods?{query}").parse().unwrap()).unwrap()
    }

    #[test]
    fn the_first_value_of_a_repeated_parameter_wins() {
        assert_eq!(q("limit=5&limit=7")["limit"], "5");
        assert_eq!(q("labelSelector=a%3Db&labelSelector=c")["labelSelector"], "a=b");
    }

    #[test]
    fn a_flag_is_false_only_when_absent_zero_or_false() {
        for (query, want) in [
            ("", false),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("watch=true", true),
            ("watch=1", true),
            ("watch=yes", true),
            ("watch=", true),
            ("watch", true),
            ("watch=true&watch=false", true),
            ("watch=false&watch=true", false),
        ] {
            assert_eq!(flag(&q(query), "watch"), want, "?{query}");
        }
    }
}
