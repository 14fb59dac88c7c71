//! Power-loss protection under the device's commands: the dump written at a power cut (or a clean
//! close) from every index's DRAM state, and its bound. The durability layer below writes the
//! dump's bytes and computes the bound.

use kvssd_flash::SimTime;

use super::Core;
use crate::durability::plp::{self, DumpBound, DumpReport};
use crate::{Device, DeviceError, PresetKind, Result};

impl Core {
    /// The dump bound for the namespaces the device holds now.
    pub(super) fn plp_dump_bound(&self) -> DumpBound {
        let presets: Vec<PresetKind> = self
            .namespaces
            .values()
            .map(|namespace| namespace.spec.preset)
            .collect();
        plp::dump_bound(&self.config, self.space.geometry(), &presets)
    }

    /// Writes the dump: the namespace table and every index's state as the parts of a checkpoint
    /// record, then a superblock copy naming it.
    pub(super) fn write_dump(&mut self, at: SimTime) -> Result<DumpReport> {
        let bound = self.plp_dump_bound();
        let Some(mut journal) = self.plp.take() else {
            return Err(DeviceError::Unsupported(
                "the device does not run with power-loss protection".into(),
            ));
        };
        journal.next_namespace = self.next_namespace;
        journal.namespaces = self
            .namespaces
            .iter()
            .map(|(&id, namespace)| (id, namespace.spec.clone()))
            .collect();
        self.publish_engine_states(0);
        let result = plp::write_dump(&mut journal, &mut self.space, at, bound);
        self.plp = Some(journal);
        result
    }
}

impl Device {
    /// Power fails at `at`. With power-loss protection the device first writes its dump on the
    /// capacitor's energy (returned: what it wrote and the bound it had to meet); then the flash
    /// loses power, and every later command fails until the flash is opened again. Without PLP
    /// the flash simply loses power (`None`).
    pub fn power_cut(&self, at: SimTime) -> Result<Option<DumpReport>> {
        let mut core = self.lock()?;
        let report = if core.plp.is_some() {
            let report = core.write_dump(at)?;
            core.last_dump = Some(report);
            Some(report)
        } else {
            None
        };
        core.space.flash_mut().cut_power();
        Ok(report)
    }

    /// The most the dump at a power cut may write for the namespaces the device holds now.
    pub fn plp_dump_bound(&self) -> Result<DumpBound> {
        Ok(self.lock()?.plp_dump_bound())
    }

    /// Whether the flash has lost power (a command that failed this way may or may not have been
    /// applied: it was in flight).
    pub fn is_power_cut(&self) -> Result<bool> {
        Ok(self.lock()?.space.flash().is_power_cut())
    }
}
