//! Host paths compared as directories: whether deleting or emptying one volume's `hostPath`
//! would destroy what another volume names.
//!
//! Two PersistentVolumes may name the same directory, or one a directory inside the other's:
//! nothing in the API forbids it. Upstream's host-path deleter removes the directory whatever
//! else names it, so a Delete volume released by its claim could take a Bound volume's data with
//! it. The controller asks [`conflict`] (through the volume index, which keeps every host path)
//! before it deletes or recycles, and refuses when another volume's directory would go too.
//!
//! Paths are compared lexically after [`normalize`]: duplicate and trailing slashes and `.`
//! components dropped, `..` taking the previous component away. Symlinks are not resolved here:
//! the host-path plugin refuses to act through one.

use crate::k8s::PersistentVolume;

/// How another volume's host path lies relative to the one about to be deleted or recycled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// The same directory.
    Same,
    /// The other volume's directory is inside this one.
    Inside,
    /// The other volume's directory contains this one.
    Contains,
}

/// Another volume whose directory deleting or recycling this volume's would destroy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedPath {
    /// This volume's host path, as the volume names it.
    pub path: String,
    /// The other volume's name.
    pub other: String,
    /// The other volume's host path, normalised.
    pub other_path: String,
    /// Where the other volume's directory lies.
    pub overlap: Overlap,
}

impl SharedPath {
    /// The message of the refusal, for an event and the volume's status: `action` is what was
    /// not done (`deleting`, `recycling`).
    pub fn refusal(&self, action: &str) -> String {
        let (path, other, other_path) = (&self.path, &self.other, &self.other_path);
        match self.overlap {
            Overlap::Same => format!("host path {path} is also used by volume {other}; not {action} it"),
            Overlap::Inside => {
                format!("host path {path} contains {other_path}, the host path of volume {other}; not {action} it")
            }
            Overlap::Contains => {
                format!("host path {path} is inside {other_path}, the host path of volume {other}; not {action} it")
            }
        }
    }
}

/// The volume's `spec.hostPath.path`, if it has a non-empty one.
pub fn of(volume: &PersistentVolume) -> Option<&str> {
    volume.spec.as_ref()?.host_path.as_ref().map(|h| h.path.as_str()).filter(|p| !p.is_empty())
}

/// The path with duplicate and trailing slashes and `.` components dropped and each `..` taking
/// the component before it away (never above the root of an absolute path): `/a//b/./c/../` is
/// `/a/b`. A relative path stays relative (`.` when nothing is left).
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            c => parts.push(c),
        }
    }
    match (absolute, parts.is_empty()) {
        (true, _) => format!("/{}", parts.join("/")),
        (false, true) => ".".into(),
        (false, false) => parts.join("/"),
    }
}

/// Where `other` lies relative to `this`, both normalised; `None` when neither contains the other.
pub fn overlap(this: &str, other: &str) -> Option<Overlap> {
    if this == other {
        return Some(Overlap::Same);
    }
    let under = |inner: &str, outer: &str| {
        inner.strip_prefix(outer).is_some_and(|rest| outer.ends_with('/') || rest.starts_with('/'))
    };
    if under(other, this) {
        Some(Overlap::Inside)
    } else if under(this, other) {
        Some(Overlap::Contains)
    } else {
        None
    }
}

/// The first (by name) of `others`, given as (name, host path), other than `volume` itself, whose
/// directory deleting or recycling `volume`'s would destroy; `None` for a volume with no host path.
pub fn conflict<'a>(
    volume: &PersistentVolume,
    others: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<SharedPath> {
    let path = of(volume)?;
    let this = normalize(path);
    let name = volume.metadata.name.as_deref().unwrap_or("");
    others
        .into_iter()
        .filter(|(n, _)| *n != name)
        .filter_map(|(n, p)| {
            let other_path = normalize(p);
            overlap(&this, &other_path).map(|overlap| SharedPath {
                path: path.to_string(),
                other: n.to_string(),
                other_path,
                overlap,
            })
        })
        .min_by(|a, b| a.other.cmp(&b.other))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::{ObjectMeta, PersistentVolumeSpec};
    use k8s_openapi::api::core::v1::HostPathVolumeSource;

    #[test]
    fn normalize_drops_slashes_dots_and_backsteps() {
        for (raw, want) in [
            ("/a/b", "/a/b"),
            ("/a/b/", "/a/b"),
            ("//a///b//", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("/a/c/../b", "/a/b"),
            ("/a/b/c/../..", "/a"),
            ("/../a", "/a"),
            ("/", "/"),
            ("/.", "/"),
            ("a/./b/", "a/b"),
            ("a/..", "."),
            ("../a", "../a"),
        ] {
            assert_eq!(normalize(raw), want, "{raw}");
        }
    }

    #[test]
    fn overlap_is_by_whole_components() {
        assert_eq!(overlap("/r/x", "/r/x"), Some(Overlap::Same));
        assert_eq!(overlap("/r/x", "/r/x/y"), Some(Overlap::Inside));
        assert_eq!(overlap("/r/x/y", "/r/x"), Some(Overlap::Contains));
        assert_eq!(overlap("/", "/r"), Some(Overlap::Inside));
        assert_eq!(overlap("/r", "/"), Some(Overlap::Contains));
        assert_eq!(overlap("/r/x", "/r/xy"), None, "a name that only starts alike is another directory");
        assert_eq!(overlap("/r/xy", "/r/x"), None);
        assert_eq!(overlap("/r/x", "/r/y"), None);
    }

    fn pv(name: &str, path: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource { path: path.into(), type_: None }),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn conflict_finds_another_volume_naming_the_same_or_a_nested_directory() {
        let a = pv("pv-a", "/root/shared/");
        let same = conflict(&a, [("pv-b", "/root//shared")]).unwrap();
        assert_eq!(same.overlap, Overlap::Same);
        assert_eq!(same.refusal("deleting"), "host path /root/shared/ is also used by volume pv-b; not deleting it");
        let inside = conflict(&a, [("pv-b", "/root/shared/./y/")]).unwrap();
        assert_eq!(inside.overlap, Overlap::Inside);
        assert_eq!(
            inside.refusal("recycling"),
            "host path /root/shared/ contains /root/shared/y, the host path of volume pv-b; not recycling it"
        );
        let contains = conflict(&a, [("pv-b", "/root/x/../")]).unwrap();
        assert_eq!(contains.overlap, Overlap::Contains);
        assert_eq!(contains.other_path, "/root");
    }

    #[test]
    fn conflict_ignores_the_volume_itself_and_unrelated_directories() {
        let a = pv("pv-a", "/root/shared");
        assert_eq!(conflict(&a, [("pv-a", "/root/shared"), ("pv-c", "/root/shared2"), ("pv-d", "/root/other")]), None);
        let first = conflict(&a, [("pv-z", "/root/shared"), ("pv-b", "/root/shared/y")]).unwrap();
        assert_eq!(first.other, "pv-b", "the first by name");
        let no_path = PersistentVolume { spec: Some(Default::default()), ..pv("pv-a", "") };
        assert_eq!(conflict(&no_path, [("pv-b", "/root/shared")]), None);
    }
}
