//! The product as a benchmark target: a fresh [`Device`] with one namespace, driven through its
//! command set exactly as a user's program drives it (store, retrieve, scan), in power-loss
//! protection mode (the papers' capacitor assumption). Everything the benchmarks report comes
//! from the device's public statistics: the flash counters of [`Device::stats`] and the
//! namespace's figures of [`Device::list_namespaces`].

use std::collections::BTreeMap;

use kvssd_device::{
    Device, DeviceError, Durability, NamespaceId, NamespaceInfo, NamespaceSpec, Pairs, PresetKind,
    StoreMode,
};
use kvssd_engine::EngineError;
use kvssd_flash::{Counters, Flash, SimTime};

use crate::profile::BenchProfile;
use crate::runner::{SimTarget, TargetError};

/// A device of a benchmark profile with one namespace of a preset.
pub struct DeviceTarget {
    device: Device,
    namespace: NamespaceId,
}

fn failed(error: DeviceError) -> TargetError {
    TargetError::Failed(error.to_string())
}

impl DeviceTarget {
    /// A fresh device of `profile` (on its media) in power-loss protection mode with one namespace
    /// of the preset named `preset`.
    pub fn open(profile: &BenchProfile, preset: &str) -> Result<DeviceTarget, String> {
        let kind: PresetKind = preset
            .parse()
            .map_err(|error: EngineError| error.to_string())?;
        let cannot = |error: String| format!("cannot open a {preset} device: {error}");
        let flash = Flash::new_on(
            &profile.media,
            profile.flash.geometry,
            Some(profile.flash.timing.clone()),
        )
        .map_err(|error| cannot(error.to_string()))?;
        let config = profile.device_config(kind, Durability::PowerLossProtection);
        let device = Device::open(flash, config).map_err(|error| cannot(error.to_string()))?;
        let namespace = device
            .create_namespace(NamespaceSpec::new(kind))
            .map_err(|error| cannot(error.to_string()))?;
        Ok(DeviceTarget { device, namespace })
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The LSM-tree's height h (L0 included) and the levels pinned in DRAM k, now; `None` for a
    /// namespace without levels (hash presets).
    pub fn tree(&self) -> Option<(usize, usize)> {
        let info = self.info()?;
        let pinned = info
            .counters
            .iter()
            .find(|(name, _)| *name == "pinned_levels")
            .map(|&(_, count)| count as usize)?;
        Some((info.levels + 1, pinned))
    }

    /// The namespace's figures now.
    fn info(&self) -> Option<NamespaceInfo> {
        self.device
            .list_namespaces()
            .ok()?
            .into_iter()
            .find(|info| info.id == self.namespace)
    }
}

impl SimTarget for DeviceTarget {
    fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime, TargetError> {
        self.device
            .store(at, self.namespace, key, value, StoreMode::Upsert)
            .map_err(failed)
    }

    fn get(&mut self, at: SimTime, key: &[u8]) -> Result<(Option<Vec<u8>>, SimTime), TargetError> {
        let (found, done) = self
            .device
            .retrieve(at, self.namespace, key, None)
            .map_err(failed)?;
        Ok((found.map(|found| found.value), done))
    }

    fn scan(
        &mut self,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime), TargetError> {
        match self.device.scan(at, self.namespace, start, count) {
            Ok(found) => Ok(found),
            Err(DeviceError::ScansUnsupported(preset)) => Err(TargetError::Unsupported(format!(
                "{preset} keeps no key order"
            ))),
            Err(error) => Err(failed(error)),
        }
    }

    fn prefetch_gets(&mut self, keys: &[&[u8]]) -> bool {
        // A hint: a device that cannot take it changes nothing the run measures.
        self.device
            .prefetch_gets(self.namespace, keys)
            .unwrap_or(false)
    }

    fn late_issues(&self) -> u64 {
        self.device.stats().map_or(0, |stats| stats.late_issues)
    }

    fn counters(&self) -> Counters {
        self.device.flash_counters().unwrap_or_default()
    }

    fn dram_bytes(&self) -> BTreeMap<String, u64> {
        self.info()
            .map(|info| {
                info.dram_parts
                    .into_iter()
                    .map(|(part, bytes)| (part.to_string(), bytes))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn describe(&self) -> String {
        self.info().map(|info| info.shape).unwrap_or_default()
    }

    fn extra_stats(&self) -> BTreeMap<String, u64> {
        self.info()
            .map(|info| {
                info.counters
                    .into_iter()
                    .map(|(name, count)| (name.to_string(), count))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn controller_cpu_ns(&self) -> Option<u64> {
        self.info().map(|info| info.controller_cpu_ns)
    }

    fn controller_busy_ns(&self) -> Option<[u64; 4]> {
        let busy = self.device.stats().ok()?.controller;
        Some([
            busy.request_ns,
            busy.background_ns,
            busy.gc_ns,
            busy.accelerator_ns,
        ])
    }
}
