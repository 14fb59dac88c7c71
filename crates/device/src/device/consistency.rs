//! The device's consistency check: the durable structures and every namespace's levels, read
//! through the device's own read paths (the checks themselves are in [`crate::check`]).

use kvssd_flash::SimTime;

use crate::check::{check_durable, check_levels, CheckReport};
use crate::{Device, NamespaceId, Result};

impl Device {
    /// Reads every live page and checks the index invariants (see [`crate::check`]). Returns the
    /// report (its problems empty when the device is consistent) and the completion time. An
    /// `Err` means the check itself could not run, not that a problem was found.
    pub fn check(&self, at: SimTime) -> Result<(CheckReport, SimTime)> {
        let mut core = self.lock()?;
        let core = &mut *core;
        let mut report = CheckReport::default();
        let mut t = at;
        if core.journal.is_some() {
            t = check_durable(&mut core.space, t, &mut report)?;
        }
        for (&id, namespace) in &core.namespaces {
            report.namespaces += 1;
            let Some(view) = namespace.engine.levels_view() else {
                // Engines without sorted levels have nothing here to check.
                report.namespaces_skipped += 1;
                continue;
            };
            t = check_levels(&mut core.space, NamespaceId(id), view, t, &mut report);
        }
        Ok((report, t))
    }
}
