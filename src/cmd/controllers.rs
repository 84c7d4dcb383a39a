//! `up --controllers`, read as kube-controller-manager reads its `--controllers`: a
//! comma-separated list where `*` turns on every controller that is on by default, `NAME` turns
//! one on and `-NAME` turns one off; the first entry that names a controller decides for it,
//! and a controller no entry names is on only when `*` is in the list. Names are KCM's (and
//! KCM's older aliases), for the three controllers `up` runs in-process; any other name stops
//! the start with KCM's message, so that a typo does not silently run nothing.

/// KCM's name of the binder (the PersistentVolume controller).
pub const BINDER: &str = "persistentvolume-binder-controller";
/// KCM's name of the pv-protection controller.
pub const PV_PROTECTION: &str = "persistentvolume-protection-controller";
/// KCM's name of the pvc-protection controller.
pub const PVC_PROTECTION: &str = "persistentvolumeclaim-protection-controller";

/// (name, KCM's alias) of each controller `up` runs; all three are on by default in KCM.
const KNOWN: [(&str, &str); 3] =
    [(BINDER, "persistentvolume-binder"), (PV_PROTECTION, "pv-protection"), (PVC_PROTECTION, "pvc-protection")];

/// Which of `up`'s controllers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controllers {
    /// The binder: binds, provisions, reclaims.
    pub binder: bool,
    /// pv-protection: lifts `kubernetes.io/pv-protection` from deleted volumes that are not Bound.
    pub pv_protection: bool,
    /// pvc-protection: lifts `kubernetes.io/pvc-protection` from deleted claims no pod uses, and
    /// keeps the claims' `Unused` condition.
    pub pvc_protection: bool,
}

impl Controllers {
    /// Every controller: `--controllers '*'`, KCM's default.
    #[cfg(test)]
    pub const ALL: Controllers = Controllers { binder: true, pv_protection: true, pvc_protection: true };
    /// None: `--no-controller`, the API server alone.
    pub const NONE: Controllers = Controllers { binder: false, pv_protection: false, pvc_protection: false };

    /// Whether any protection controller runs.
    pub fn protection(&self) -> bool {
        self.pv_protection || self.pvc_protection
    }

    /// Whether anything runs at all.
    pub fn any(&self) -> bool {
        self.binder || self.protection()
    }
}

/// The canonical name of `name` (itself or an alias), if `up` knows it.
fn canonical(name: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(n, alias)| *n == name || *alias == name).map(|(n, _)| *n)
}

/// Parses a `--controllers` list. An unknown name is an error in KCM's words (every unknown
/// name, in the list's order), followed by the names `up` knows.
pub fn parse(list: &str) -> Result<Controllers, String> {
    // KCM's list is a pflag string slice: an empty value is an empty list, which runs nothing.
    let entries: Vec<&str> = if list.is_empty() { Vec::new() } else { list.split(',').map(str::trim).collect() };
    let unknown: Vec<String> = entries
        .iter()
        .filter(|e| **e != "*" && canonical(e.strip_prefix('-').unwrap_or(e)).is_none())
        .map(|e| format!("{:?} is not in the list of known controllers", e.strip_prefix('-').unwrap_or(e)))
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = KNOWN.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "--controllers: {} (up runs {}; `*` for all, `-NAME` to leave one out)",
            unknown.join(", "),
            known.join(", ")
        ));
    }
    let star = entries.contains(&"*");
    let enabled = |name: &str| {
        for e in &entries {
            match e.strip_prefix('-') {
                Some(n) if canonical(n) == Some(name) => return false,
                None if canonical(e) == Some(name) => return true,
                _ => {}
            }
        }
        star
    };
    Ok(Controllers {
        binder: enabled(BINDER),
        pv_protection: enabled(PV_PROTECTION),
        pvc_protection: enabled(PVC_PROTECTION),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_runs_all_and_a_minus_leaves_one_out() {
        assert_eq!(parse("*"), Ok(Controllers::ALL));
        let no_binder = parse("*,-persistentvolume-binder-controller").unwrap();
        assert_eq!(no_binder, Controllers { binder: false, ..Controllers::ALL });
        assert!(no_binder.protection());
    }

    #[test]
    fn without_star_only_the_named_run() {
        assert_eq!(
            parse("persistentvolumeclaim-protection-controller"),
            Ok(Controllers { pvc_protection: true, ..Controllers::NONE })
        );
        assert_eq!(parse(""), Ok(Controllers::NONE));
        assert_eq!(parse("-persistentvolume-binder-controller"), Ok(Controllers::NONE));
    }

    #[test]
    fn aliases_are_kcms_and_the_first_entry_naming_a_controller_wins() {
        assert_eq!(parse("*,-persistentvolume-binder"), parse("*,-persistentvolume-binder-controller"));
        assert_eq!(parse("pv-protection, pvc-protection"), Ok(Controllers { binder: false, ..Controllers::ALL }));
        assert!(!parse("-pv-protection,*,persistentvolume-protection-controller").unwrap().pv_protection);
    }

    #[test]
    fn an_unknown_name_is_an_error_in_kcms_words() {
        let e = parse("*,-bogus,garbage-collector-controller").unwrap_err();
        assert!(e.starts_with("--controllers: \"bogus\" is not in the list of known controllers, \"garbage-collector-controller\" is not in the list of known controllers (up runs persistentvolume-binder-controller,"), "{e}");
        assert!(parse("*,").is_err(), "an empty entry names nothing");
    }
}
