//! `up --controllers`, read as kube-controller-manager reads its `--controllers`: a
//! comma-separated list where `*` turns on every controller that is on by default, `NAME` turns
//! one on and `-NAME` turns one off; the first entry that names a controller decides for it,
//! and a controller no entry names is on only when `*` is in the list. Names are KCM's (and
//! KCM's older aliases), for the controllers `up` runs in-process; any other name stops the start
//! with KCM's message, so that a typo does not silently run nothing. The attach-detach stand-in
//! is off by default, as KCM's disabled-by-default controllers are: `*` leaves it off, its name
//! turns it on.

/// KCM's name of the binder (the PersistentVolume controller).
pub const BINDER: &str = "persistentvolume-binder-controller";
/// KCM's name of the pv-protection controller.
pub const PV_PROTECTION: &str = "persistentvolume-protection-controller";
/// KCM's name of the pvc-protection controller.
pub const PVC_PROTECTION: &str = "persistentvolumeclaim-protection-controller";

/// KCM's name of the attach-detach controller (a stand-in on `up`, off unless named).
pub const ATTACH_DETACH: &str = "persistentvolume-attach-detach-controller";

/// (name, KCM's alias, on with `*`) of each controller `up` runs.
const KNOWN: [(&str, &str, bool); 4] = [
    (BINDER, "persistentvolume-binder", true),
    (PV_PROTECTION, "pv-protection", true),
    (PVC_PROTECTION, "pvc-protection", true),
    (ATTACH_DETACH, "attachdetach", false),
];

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
    /// The attach-detach stand-in: VolumeAttachments for the CSI volumes of pods on their nodes.
    pub attach_detach: bool,
}

impl Controllers {
    /// Every controller: `--controllers '*'`, KCM's default.
    #[cfg(test)]
    pub const ALL: Controllers =
        Controllers { binder: true, pv_protection: true, pvc_protection: true, attach_detach: false };
    /// None: `--no-controller`, the API server alone.
    pub const NONE: Controllers =
        Controllers { binder: false, pv_protection: false, pvc_protection: false, attach_detach: false };

    /// Whether any protection controller runs.
    pub fn protection(&self) -> bool {
        self.pv_protection || self.pvc_protection
    }

    /// Whether anything runs at all.
    pub fn any(&self) -> bool {
        self.binder || self.protection() || self.attach_detach
    }
}

/// The canonical name of `name` (itself or an alias), if `up` knows it.
fn canonical(name: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(n, alias, _)| *n == name || *alias == name).map(|(n, _, _)| *n)
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
        let known: Vec<&str> = KNOWN.iter().map(|(n, _, _)| *n).collect();
        return Err(format!(
            "--controllers: {} (up runs {}; `*` for all, `-NAME` to leave one out)",
            unknown.join(", "),
            known.join(", ")
        ));
    }
    let star = entries.contains(&"*");
    let enabled = |name: &str| {
        let by_default = KNOWN.iter().any(|(n, _, on)| *n == name && *on);
        for e in &entries {
            match e.strip_prefix('-') {
                Some(n) if canonical(n) == Some(name) => return false,
                None if canonical(e) == Some(name) => return true,
                _ => {}
            }
        }
        star && by_default
    };
    Ok(Controllers {
        binder: enabled(BINDER),
        pv_protection: enabled(PV_PROTECTION),
        pvc_protection: enabled(PVC_PROTECTION),
        attach_detach: enabled(ATTACH_DETACH),
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
    fn attach_detach_is_off_unless_named() {
        assert!(!parse("*").unwrap().attach_detach);
        let with = parse("*,attachdetach").unwrap();
        assert_eq!(with, Controllers { attach_detach: true, ..Controllers::ALL });
        assert_eq!(
            parse("persistentvolume-attach-detach-controller").unwrap(),
            Controllers { attach_detach: true, ..Controllers::NONE }
        );
        assert!(!parse("-attachdetach,*,attachdetach").unwrap().attach_detach);
    }

    #[test]
    fn an_unknown_name_is_an_error_in_kcms_words() {
        let e = parse("*,-bogus,garbage-collector-controller").unwrap_err();
        assert!(e.starts_with("--controllers: \"bogus\" is not in the list of known controllers, \"garbage-collector-controller\" is not in the list of known controllers (up runs persistentvolume-binder-controller,"), "{e}");
        assert!(parse("*,").is_err(), "an empty entry names nothing");
    }
}
